"""Building an API client the way every Kubernetes controller does: kubeconfig or in-cluster.

The same code path serves a real cluster and the simulator (which only ever hands out a
kubeconfig), so nothing here knows or cares which it is talking to.
"""

from __future__ import annotations

import os
from typing import Any


async def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient from ``kubeconfig``, else in-cluster config, else the default kubeconfig."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(context=context, client_configuration=configuration)
    return client.ApiClient(configuration)
