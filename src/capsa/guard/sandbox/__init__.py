"""The process boundary: where untrusted bytes meet parser code, and nothing else does.

Everything on the far side of the trust boundary lives here, apart from the
guard's pre-flight checks (`capsa.guard.archive`, `capsa.guard.sniff`) and
the extractors themselves (`capsa.guard.extractors`):

- `pool` — `IsolatedExtractor`, the application's side: warm workers, one
  ``select`` loop per file, every outcome typed;
- `zygote` — a worker: a broker that forks one sealed child per file and never
  holds a payload or a result;
- `child` — one file's process, from spare to exit;
- `namespaces` — the worker's namespaces and each file's own (PID, IPC,
  mount with a tmpfs scratch and a read-only root);
- `cgroups` — per-file accounting of CPU, memory and processes;
- `landlock`, `seccomp` — the filesystem allow-list and the syscall allow-list;
- `layers` — what each layer stops, and the report a worker gives of them;
- `protocol` — the control, request and reply frames, and the bounded reader;
- `doctor` — ``capsa doctor``: which layers this machine grants.

`docs/threat-model.md` says what each layer promises and what remains.
"""

from capsa.guard.sandbox.layers import LAYERS, LayerStatus, SandboxMode, SandboxReport
from capsa.guard.sandbox.pool import IsolatedExtractor, WorkerHealth

__all__ = ["LAYERS", "IsolatedExtractor", "LayerStatus", "SandboxMode", "SandboxReport",
           "WorkerHealth"]
