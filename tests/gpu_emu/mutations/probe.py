# Mutations of nn/nn_probe.c that test_deviceless_probes should catch (run.py).
SOURCE = "nn/nn_probe.c"
TEST = "test_deviceless_probes"
M = [
("Q1", "the review's bug: the second partition is split from the first split's remainder",
 [("""  e = cu->cuDevSmResourceSplitByCount(small, &nb, &all, NULL, 0, want_small);
  if (e == CUDA_SUCCESS && nb >= 1) {
    nb = 1;
    e = cu->cuDevSmResourceSplitByCount(large, &nb, &all, NULL, 0, want_large);""", """  CUdevResource rest;
  e = cu->cuDevSmResourceSplitByCount(small, &nb, &all, &rest, 0, want_small);
  if (e == CUDA_SUCCESS && nb >= 1) {
    nb = 1;
    e = cu->cuDevSmResourceSplitByCount(large, &nb, &rest, NULL, 0, want_large);""")]),
("Q2", "a green context is destroyed before the stream made in it",
 [("""  if (stream) cu->cuStreamDestroy(stream);
  if (green) cu->cuGreenCtxDestroy(green);""", """  if (green) cu->cuGreenCtxDestroy(green);
  if (stream) cu->cuStreamDestroy(stream);""")]),
("Q3", "the caller's context is not given back",
 [("""  cu->cuCtxSetCurrent(saved);
  if (t_small <= 0""", """  if (t_small <= 0""")]),
("Q4", "the speed ratio is inverted",
 [("speed_ratio = t_small / t_large;", "speed_ratio = t_large / t_small;")]),
("Q5", "the NCCL all-reduce is not polled (bounded) before its stream is synchronised: only a stuck "
       "all-reduce tells, which this test does not make; not expected to show",
 [("    if (!hs_cuda_stream_drained(streams[i], NCCL_PROBE_WAIT_S)) {", "    if (0) {")]),
]
