# Mutations of nn/nn_cuda_part.c that test_deviceless_partitions should catch (run.py).
SOURCE = "nn/nn_cuda_part.c"
TEST = "test_deviceless_partitions"
M = [
("P1", "groups other partitions hold are taken again (every net split the whole GPU and took group 0)",
 [("if (t->holder[i]) continue;", ";")]),
("P2", "groups are never given back",
 [("for (int i = 0; i < p->n_groups; i++) sm_tables[p->ordinal].holder[p->groups[i]] = 0;", ";")]),
("P3", "the green context is destroyed before the stream made in it",
 [("""  if (p->stream) (void)drv->cuStreamDestroy(p->stream);
  if (p->green) (void)drv->cuGreenCtxDestroy(p->green);""", """  if (p->green) (void)drv->cuGreenCtxDestroy(p->green);
  if (p->stream) (void)drv->cuStreamDestroy(p->stream);""")]),
("P4", "the GPU is split anew (and its table cleared) for every partition",
 [("if (t->ready) return 0;", "if (0) return 0;")]),
("P5", "the SMs asked for are reported, not the SMs granted",
 [("if (!rc) p->sm_count = (int)granted.sm.smCount;", "if (!rc) p->sm_count = (int)want;")]),
("P6", "the table is read and written without its lock (a race: the emulated driver serialises its calls, so "
       "this one is not expected to show)",
 [("""  pthread_mutex_lock(&table_mu);
  sm_table *t""", """  sm_table *t"""), ("""    *n_res = k;
  }
  pthread_mutex_unlock(&table_mu);""", """    *n_res = k;
  }""")]),
("P7", "a group is split again (a split's result, which cuda.h forbids) instead of combining the split's groups",
 [("rc = hs_cudrv_err(drv, drv->cuDevResourceGenerateDesc(&desc, res, (unsigned)n_res)",
   "CUdevResource sub[2];\n  unsigned two = 1;\n  (void)drv->cuDevSmResourceSplitByCount(sub, &two, &res[0], NULL, 0, 8);\n"
   "  rc = hs_cudrv_err(drv, drv->cuDevResourceGenerateDesc(&desc, sub, two)")]),
]
