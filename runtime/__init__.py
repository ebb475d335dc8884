"""Runtime: devices (host | acl), device memory, model load/execute, collectives."""

from npu_inductor.runtime.device import AclDevice, DeviceError, HostDevice, get_device

__all__ = ["AclDevice", "DeviceError", "HostDevice", "get_device"]
