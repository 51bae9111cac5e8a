"""chipd: the Python client of the chipd node runtime, over libchipd (ctypes).

    import chipd
    with chipd.connect() as conn:
        for tok in conn.submit("synthetic", tokens=8, device_us=200):
            print(tok.seq, tok.value)

libchipd is found through $CHIPD_LIB (a path), else ``ctypes.util.find_library``,
else the soname ``libchipd.so.0``. Connections may be shared by threads; ctypes
releases the GIL during every libchipd call. See ``chipd.client`` for lifetimes and
``chipd.errors`` for the exceptions.
"""

from .client import (
    ChipStatus,
    Connection,
    Status,
    Stream,
    Token,
    Workload,
    WorkloadParam,
    connect,
)
from .errors import (
    BadRequest,
    CallTimeout,
    Cancelled,
    ChipdError,
    DeviceError,
    Draining,
    DuplicateId,
    Internal,
    NoCapacity,
    NoSuchInstance,
    NodeLost,
    NotFound,
    NotRunning,
    QueueFull,
    Timeout,
    TooLarge,
    UnsupportedVersion,
    WorkerLost,
)

__version__ = "0.1.0"

__all__ = [
    "connect",
    "Connection",
    "Stream",
    "Token",
    "Status",
    "ChipStatus",
    "Workload",
    "WorkloadParam",
    "ChipdError",
    "BadRequest",
    "UnsupportedVersion",
    "TooLarge",
    "QueueFull",
    "NoCapacity",
    "DuplicateId",
    "NotFound",
    "Cancelled",
    "Draining",
    "WorkerLost",
    "DeviceError",
    "Timeout",
    "Internal",
    "NodeLost",
    "NotRunning",
    "NoSuchInstance",
    "CallTimeout",
]
