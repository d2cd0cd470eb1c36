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
("W3", "a closed net stays in the list of open nets (record_owner reads the freed net: ASan stops at once; a plain "
       "build may read the freed memory as a net without gradients, and hangs once a new net reuses it, the list a cycle)",
 [("  net_list_remove(cn);\n", "")]),
]
