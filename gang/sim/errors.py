"""API errors as a kube-apiserver reports them: an HTTP status plus a ``Status`` body.

Clients branch on ``code`` and ``reason`` (kubernetes-asyncio raises ``ApiException(status=...)``;
a scheduler treats 409 on a binding as "already assigned"), and operators read ``message``. So
every error leaves the simulator shaped like the recorded answers in ``shared/k8s-api``: the
fields in Go's struct order (kind, apiVersion, metadata, status, message, reason, details, code).
"""

from __future__ import annotations

from typing import Any

from gang.sim.resources import ResourceType


def status_body(
    code: int,
    *,
    status: str = "Failure",
    message: str | None = None,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``v1.Status`` with keys in the order the Go encoder writes them."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status}
    if message is not None:
        body["message"] = message
    if reason is not None:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """Raised anywhere in request handling; the HTTP layer turns it into a Status answer."""

    def __init__(
        self,
        code: int,
        reason: str | None,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return status_body(
            self.code, message=self.message, reason=self.reason, details=self.details
        )


def _details(rt: ResourceType, name: str, kind: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = kind or rt.plural
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{rt.qualified_plural} "{name}" not found', _details(rt, name)
    )


def namespace_not_found(namespace: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'namespaces "{namespace}" not found',
        {"name": namespace, "kind": "namespaces"},
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{rt.qualified_plural} "{name}" already exists', _details(rt, name)
    )


def conflict(rt: ResourceType, name: str, why: str, kind: str | None = None) -> ApiError:
    subject = kind or rt.qualified_plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {subject} "{name}": {why}',
        _details(rt, name, kind),
    )


STALE_WRITE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(rt: ResourceType, name: str) -> ApiError:
    return conflict(rt, name, STALE_WRITE)


# field.ErrorType texts and the StatusCause reasons they map to (apimachinery field/errors.go)
_CAUSE_REASONS = (
    ("Required value", "FieldValueRequired"),
    ("Forbidden", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Not found", "FieldValueNotFound"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
)


def _cause_reason(message: str) -> str:
    return next(
        (r for prefix, r in _CAUSE_REASONS if message.startswith(prefix)), "FieldValueInvalid"
    )


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per (field, message), e.g. ("spec.minMember", "Invalid value: -1").

    The message names the kind qualified by its group (``PodGroup.scheduling.x-k8s.io``), as
    ``errors.NewInvalid`` does with a GroupKind; each cause's reason follows its error type.
    """
    summary = ", ".join(f"{fld}: {msg}" for fld, msg in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    details = _details(rt, name, rt.kind)
    details["causes"] = [
        {"reason": _cause_reason(msg), "message": msg, "field": fld} for fld, msg in causes
    ]
    kind = rt.kind if not rt.group else f"{rt.kind}.{rt.group}"
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {summary}', details)


def forbidden(rt: ResourceType, name: str, why: str) -> ApiError:
    """403 from an admission plugin: ``pods "x" is forbidden: ...``."""
    return ApiError(
        403, "Forbidden", f'{rt.qualified_plural} "{name}" is forbidden: {why}', _details(rt, name)
    )


def unprocessable(cause: str) -> ApiError:
    """A bare 422 (``errors.NewGenericServerResponse``), e.g. a JSON patch that fails to apply."""
    return ApiError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": cause}]},
    )


def storage_error(message: str) -> ApiError:
    """A plain error from the storage layer: HTTP 500 with neither reason nor details."""
    return ApiError(500, None, message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def resource_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )


def internal_error(why: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {why}",
        {"causes": [{"message": why}]},
    )


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message)  # no details, unlike most errors
