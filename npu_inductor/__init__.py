"""npu_inductor"""
