# Mutations of nn/nn_cuda.c that test_deviceless_gpu_partitions should catch (run.py); those that
# test_deviceless_gpu_nn sees are in cuda.py.
SOURCE = "nn/nn_cuda.c"
TEST = "test_deviceless_gpu_partitions"
M = [
("W1", "a workspace grown for a larger batch's plans leaves the captured step alive, holding the freed workspace",
 [("""  if (cn->step) {
    (void)cudaGraphExecDestroy(cn->step);
    cn->step = NULL;
  }
  dev_free(cn->workspace);""", """  dev_free(cn->workspace);""")]),
("W2", "record_owner looks for a gradient pointer in the parameters' range (a copy-paste slip): gradients have no owner",
 [("(g && p >= g && p < g + bytes)", "(g && p >= a && p < a + bytes)")]),
("W3", "a closed net stays in the list of open nets (not expected to show: the \"closed nets are forgotten\" check asks "
       "about a stack address, which no net owns; in some runs a new net's memory reuses the freed one's, the list "
       "becomes a cycle and the test hangs to its timeout)",
 [("  net_list_remove(cn);\n", "")]),
]
