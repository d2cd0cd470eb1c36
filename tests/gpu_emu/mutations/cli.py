# Mutations of nn/nn_cuda.c that only a whole command shows: deviceless_gpu_check_emu runs
# tools/gpu-check.sh with hetsim_emu (run.py rebuilds that program; the test assembles its bundle
# from the build).
SOURCE = "nn/nn_cuda.c"
TEST = "deviceless_gpu_check_emu"
TARGET = "hetsim_emu"
M = [
("C1", "entry points leave a green net's context current on the calling thread (the local step's main thread "
       "still holds a worker's when the worker's thread calls it)",
 [("  if (cn->ctx && prev != cn->ctx) (void)cn->drv->cuCtxSetCurrent(prev);\n", "  (void)prev;\n")]),
]
