# Mutations of real/real_local.c that test_deviceless_local should catch (run.py).
SOURCE = "real/real_local.c"
TEST = "test_deviceless_local"
M = [
("L1", "the reduction does not wait for the owning nets' events (their writes may still be in flight)",
 [("if ((e = cudaStreamWaitEvent(c->stream, s->ev[i], 0)) != cudaSuccess)", "if (0)")]),
("L2", "the reduction's completion is not polled: participants return before the sum is in their buffers",
 [("""    e = cudaEventQuery(done);
    if (e == cudaSuccess) break;""", """    e = cudaSuccess;
    break;""")]),
("L3", "the last arrival leaves the primary context current on its thread",
 [("""  (void)drv->cuCtxSetCurrent(prev);
  return rc;""", """  return rc;""")]),
("L4", "close keeps the primary context retained",
 [("if (!c->wedged) (void)c->drv->cuDevicePrimaryCtxRelease(c->dev);", ";")]),
("L5", "past 16 sources the chained launches overwrite the sum instead of adding to it",
 [("k > 0, s->n", "0, s->n")]),
("L6", "the sum is not copied back into the first participant's buffer",
 [("""  for (int i = 0; !rc && i < s->nranks; i++)
    if ((e = cudaMemcpyAsync""", """  for (int i = 1; !rc && i < s->nranks; i++)
    if ((e = cudaMemcpyAsync""")]),
("L7", "a participant waiting for the others ignores abort",
 [("else if (c->aborted) rc = HS_EINTR;", "else if (0) rc = HS_EINTR;")]),
("L8", "a participant destroys its event before the reduction has waited on it",
 [("""  int rc = 0;
  if (s->nranks != nranks""", """  (void)cudaEventDestroy(ev);
  int rc = 0;
  if (s->nranks != nranks""")]),
]
