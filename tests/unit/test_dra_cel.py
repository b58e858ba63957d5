"""Device selectors in CEL with Kubernetes' extension functions, on NVIDIA-shaped devices."""

from __future__ import annotations

import itertools

import pytest

from gang.models.dra import DraParseError, Version, parse_slice
from gang.scheduling.dra.cel import SelectorError, device_variable, matches

DRIVER = "gpu.nvidia.com"
SLICE = parse_slice(
    {
        "metadata": {"name": "node-1-gpus"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                        "cudaComputeCapability": {"version": "9.0.0"},
                        "driverVersion": {"version": "570.133.20"},
                        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
                    },
                    "capacity": {"memory": {"value": "81559Mi"}},
                }
            ],
        },
    }
)
GPU = device_variable(DRIVER, SLICE.devices[0])


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'", True),
        (f"device.attributes['{DRIVER}'].productName.lowerAscii().contains('h100')", True),
        (
            f"device.attributes['{DRIVER}'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0",
            True,
        ),
        (f"device.attributes['{DRIVER}'].driverVersion.isLessThan(semver('550.0.0'))", False),
        (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('80Gi')) >= 0", False),
        (f"device.capacity['{DRIVER}'].memory.isGreaterThan(quantity('40Gi'))", True),
        ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:15'", True),
        ("'model' in device.attributes['example.com']", False),  # an unknown domain is empty
        ("isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true)", True),
        ("isQuantity('10Gi') && !isQuantity('ten')", True),
    ],
)
def test_selectors(expression: str, expected: bool) -> None:
    assert matches(expression, GPU) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f"device.attributes['{DRIVER}'].model == 'x'", "CEL runtime error: no such key: model"),
        ("device.nope == 1", "CEL runtime error"),
        ("device.driver ==", "CEL compile error"),
        ("device.driver", "expected bool"),
        ("quantity('ten').isInteger()", "CEL runtime error"),
    ],
)
def test_a_failing_selector_is_an_error_with_its_reason(expression: str, message: str) -> None:
    with pytest.raises(SelectorError) as failed:
        matches(expression, GPU)
    assert message in str(failed.value)


def test_semantic_version_precedence() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-rc.1", "1.0.0"]
    versions = [Version.parse(v) for v in ordered]
    for lower, higher in itertools.pairwise(versions):
        assert lower.compare(higher) < 0 < higher.compare(lower)
    assert Version.parse("1.0.0+build").compare(Version.parse("1.0.0")) == 0
    assert Version.parse("v2.1", normalize=True).compare(Version.parse("2.1.0")) == 0
    with pytest.raises(DraParseError):
        Version.parse("2.1")
