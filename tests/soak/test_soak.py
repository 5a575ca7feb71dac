"""The soak, shortened: 500 generated attachments through extract_many under injected faults.

The generator, the fault-injecting pool and the checks live in
``benchmarks/soak.py`` (one copy, so the benchmark and this test cannot
drift apart); this file runs it once and asserts the invariants the
benchmark only reports.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from capsa.guard.testing import FAULTS, FaultInjectingExtractor

pytestmark = pytest.mark.slow

_N = 500
_WORKERS = 2


def _load_soak() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"
    spec = importlib.util.spec_from_file_location("capsa_benchmark_soak", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


soak_module = _load_soak()


@pytest.fixture(scope="module")
def run() -> Any:
    pytest.importorskip("docx")
    return soak_module.soak(_N, workers=_WORKERS, seed=0,
                            limits=soak_module.LIMITS.model_copy(update={"timeout_s": 1.0}))


def test_soak_breaks_no_invariant(run: Any) -> None:
    assert run.violations == []


def test_soak_gives_every_attachment_exactly_one_outcome(run: Any) -> None:
    assert sum(run.outcomes.values()) == _N


def test_soak_injects_every_fault_and_extracts_most_good_files(run: Any) -> None:
    assert set(run.faults) == set(FAULTS)
    assert run.outcomes["extracted"] > _N // 2


def test_soak_omits_every_hostile_shape(run: Any) -> None:
    for shape in soak_module.HOSTILE:
        assert "extracted" not in run.by_shape.get(shape, {"omitted": 1}), shape
    assert set(soak_module.HOSTILE) <= set(run.by_shape)


def test_soak_leaves_no_worker_process_behind(run: Any) -> None:
    assert run.processes_after == run.baseline_processes
    # a warm worker, the init of its PID namespace (the worker re-forks into
    # it), its per-file child, the next file's spare (forked while the current
    # file parses), and Tesseract under the child
    assert run.max_processes <= run.baseline_processes + 5 * _WORKERS


def test_soak_parent_memory_stays_flat_after_warm_up(run: Any) -> None:
    warm = [s.rss_kib for s in run.samples if s.done >= _N // 4]
    print(f"parent RSS after a quarter: {warm[0] / 1024:.1f} MiB, peak {max(warm) / 1024:.1f}, "
          f"last {warm[-1] / 1024:.1f}; processes max {run.max_processes}")
    assert max(warm) - warm[0] < 48 * 1024


def test_fault_injection_is_a_pure_function_of_payload_and_seed() -> None:
    rates = {"crash": 0.3, "raise": 0.3}
    one = FaultInjectingExtractor(seed=1, rates=rates)
    payloads = [f"payload {i}".encode() for i in range(200)]
    drawn = [one.fault_for(p) for p in payloads]
    assert drawn == [FaultInjectingExtractor(seed=1, rates=rates).fault_for(p) for p in payloads]
    assert drawn != [FaultInjectingExtractor(seed=2, rates=rates).fault_for(p) for p in payloads]
    assert {"crash", "raise", None} == set(drawn)


def test_fault_injection_refuses_rates_over_one() -> None:
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultInjectingExtractor(rates={"hang": 0.6, "crash": 0.6})



def test_soak_attachments_are_the_same_bytes_on_every_run() -> None:
    chaos = soak_module.chaos_extractor(0)

    def digests() -> list[str]:
        return [soak_module.make_case(i, 0, soak_module.LIMITS, chaos)[0].sha256
                for i in range(80)]

    first = digests()
    time.sleep(2.1)  # past the zip headers' two-second clock and the documents' seconds
    assert digests() == first


def test_fault_injection_passes_per_call_limits_to_the_inner_extractor() -> None:
    from capsa.guard import ExtractionLimits
    from capsa.guard.extractors import Router, TesseractExtractor

    chaos = FaultInjectingExtractor(Router([TesseractExtractor(max_pixels=1000)]), seed=3,
                                    rates={"raise": 0.5})
    tight = chaos.with_limits(ExtractionLimits(max_pixels=10))
    assert tight.inner.extractors[0].max_pixels == 10
    assert [tight.fault_for(bytes([i])) for i in range(50)] == [
        chaos.fault_for(bytes([i])) for i in range(50)]
