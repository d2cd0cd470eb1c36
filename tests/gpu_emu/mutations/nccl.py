# Mutations of real/real_nccl.c that test_deviceless_nccl should catch (run.py): each puts back a
# bug its header says was fixed, or breaks one of its rules. (id, what it breaks, [(old, new)]).
SOURCE = "real/real_nccl.c"
TEST = "test_deviceless_nccl"
M = [
("M1", "enqueued() does not poll the communicator to ncclSuccess: the completion event is recorded (and the next CUDA call made) right after ncclInProgress",
 [("  return poll_comm(c, comm, WAIT_READY, dl, what, d);\n}", "  (void)dl;\n  return 0;\n}")]),
("M2", "the receive queues its copy to the host before polling the receive's completion (right after the enqueue poll)",
 [("""  rc = completed(c, comm, dl, what, d);
  if (rc || send) return rc;""", """  if (!send) (void)cudaMemcpyAsync(host, c->bounce, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, c->stream);
  rc = completed(c, comm, dl, what, d);
  if (rc || send) return rc;
  return rc;""")]),
("M3a", "teardown skips ncclCommFinalize and its poll: ncclCommDestroy at once",
 [("""  for (int i = 0; i < n && !rc; i++) {
    ncclResult_t r = c->nccl->ncclCommFinalize(comms[i]);""", """  for (int i = 0; i < n && !rc && 0; i++) {
    ncclResult_t r = c->nccl->ncclCommFinalize(comms[i]);"""),
  ("""  for (int i = 0; i < n && !rc; i++) rc = poll_comm(c, comms[i], WAIT_READY, &dl, "teardown (ncclCommFinalize)", &d);""",
   """  for (int i = 0; i < n && !rc && 0; i++) rc = poll_comm(c, comms[i], WAIT_READY, &dl, "teardown (ncclCommFinalize)", &d);""")]),
("M3b", "teardown calls ncclCommFinalize but does not poll it to ncclSuccess before ncclCommDestroy",
 [("""  for (int i = 0; i < n && !rc; i++) rc = poll_comm(c, comms[i], WAIT_READY, &dl, "teardown (ncclCommFinalize)", &d);""",
   """  for (int i = 0; i < n && !rc && 0; i++) rc = poll_comm(c, comms[i], WAIT_READY, &dl, "teardown (ncclCommFinalize)", &d);""")]),
("M3c", "teardown finalizes and polls each communicator in turn (finalize A, poll A, finalize B, ...); "
        "every rank makes its communicators in the same order, so it cannot deadlock here: not expected to show",
 [("""    ncclResult_t r = c->nccl->ncclCommFinalize(comms[i]);
    if (r != ncclSuccess && r != ncclInProgress) rc = nccl_fail(c, r, comms[i], "ncclCommFinalize", &d);
  }""", """    ncclResult_t r = c->nccl->ncclCommFinalize(comms[i]);
    if (r != ncclSuccess && r != ncclInProgress) rc = nccl_fail(c, r, comms[i], "ncclCommFinalize", &d);
    if (!rc) rc = poll_comm(c, comms[i], WAIT_READY, &dl, "teardown (ncclCommFinalize)", &d);
  }""")]),
("M4a", "after an abort the handles are kept and the stored-failure check is skipped: later operations call NCCL on the freed communicators",
 [("""      (void)c->nccl->ncclCommAbort(s->comm);
      s->comm = NULL;""", """      (void)c->nccl->ncclCommAbort(s->comm);"""),
  ("""    (void)c->nccl->ncclCommAbort(c->world_comm);
    c->world_comm = NULL;""", """    (void)c->nccl->ncclCommAbort(c->world_comm);"""),
  ("""static int after_abort(const hs_real_comm *c, const char *what, hs_diag *d) {
  if (!c->comms_aborted) return 0;""", """static int after_abort(const hs_real_comm *c, const char *what, hs_diag *d) {
  if (c->comms_aborted >= 0) return 0;""")]),
("M4b", "after an abort the stored-failure check is skipped (handles cleared): later operations call NCCL again",
 [("""static int after_abort(const hs_real_comm *c, const char *what, hs_diag *d) {
  if (!c->comms_aborted) return 0;""", """static int after_abort(const hs_real_comm *c, const char *what, hs_diag *d) {
  if (c->comms_aborted >= 0) return 0;""")]),
("M4c", "the PreMulSum operator is destroyed even when the all-reduce's enqueue failed and aborted (freed) the communicator",
 [("  if (have_op && !c->comms_aborted) (void)c->nccl->ncclRedOpDestroy(rop, comm);",
   "  if (have_op) (void)c->nccl->ncclRedOpDestroy(rop, comm);")]),
("M5", "the all-reduce does not order the backend's stream after the owning net's work (after_owner skipped)",
 [("  if (!rc) rc = after_owner(c, buf, d);", "  (void)after_owner;")]),
("M6", "the PreMulSum operator is destroyed right after ncclAllReduce returned ncclInProgress, before the enqueue poll",
 [("""  if (!rc)
    rc = enqueued(c, c->nccl->ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, rop, comm, c->stream), comm, &dl,
                  "all-reduce", d);""", """  if (!rc) {
    ncclResult_t ar = c->nccl->ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, rop, comm, c->stream);
    (void)c->nccl->ncclRedOpDestroy(rop, comm);
    have_op = 0;
    rc = enqueued(c, ar, comm, &dl, "all-reduce", d);
  }""")]),
("M7", "communicator set-up returns without polling the new communicator to ready",
 [("""  int rc = poll_comm(c, comm, WAIT_READY, dl, "communicator set-up", d);""", """  int rc = 0;
  (void)dl;""")]),
("M8", "close frees the stream, event and buffers without waiting for the stream to drain; the failure "
        "paths have mostly drained it by then, so only a timing window shows it (caught in 3 of 14 runs on "
        "2026-11-28): not expected to show every time",
 [("  int drained = !c->stream || hs_cuda_stream_drained(c->stream, c->cfg.timeout_s);", "  int drained = 1;")]),
("M9", "a rank whose run failed says goodbye (MSG_BYE) instead of MSG_FAILED",
 [("clean && !c->comms_aborted ? MSG_BYE : MSG_FAILED", "MSG_BYE")]),
("M10", "poll_comm ignores a dead peer and abort(): only the deadline ends a wait",
 [("""    pthread_mutex_lock(&c->mu);
    int rc = stop_reason(c, what, d);
    pthread_mutex_unlock(&c->mu);
    if (!rc && hs_deadline_past(dl))""", """    int rc = 0;
    if (!rc && hs_deadline_past(dl))""")]),
("M11", "bind_gpu does nothing: calls from other threads run on their current GPU",
 [("""  cudaError_t e = cudaSetDevice(c->ordinal);
  if (e == cudaSuccess) return 0;
  (void)cudaGetLastError();""", """  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) return 0;
  (void)cudaGetLastError();""")]),
("M12", "poll_comm's WAIT_EVENT returns once the communicator is ready, without waiting for the completion event",
 [("""      if (what_for == WAIT_READY) return 0;""", """      if (what_for == WAIT_READY || 1) return 0;""")]),
("M13", "a send returns once enqueued, without waiting for the transfer to be done",
 [("""  rc = completed(c, comm, dl, what, d);
  if (rc || send) return rc;""", """  if (send) return 0;
  rc = completed(c, comm, dl, what, d);
  if (rc || send) return rc;""")]),
("M14", "the original bug 1: c->nccl assigned only after bootstrap (rank 0 calls ncclGetUniqueId through NULL)",
 [("""  c->nccl = nccl; /* bootstrap's rank 0 calls ncclGetUniqueId */
  if ((rc = bootstrap(c, &l, &id, &dl, d))) goto fail;
""", """  if ((rc = bootstrap(c, &l, &id, &dl, d))) goto fail;
  c->nccl = nccl;
""")]),
("M15", "the original bug 2: recv after an abort waits for an announcement instead of returning the stored failure",
 [("""  rc = after_abort(c, "recv", d);
  while (!rc) {""", """  for (;;) {""")]),
("M16", "the world communicator's set-up failure is not aborted (comm_init leaks the half-made communicator)",
 [("""    /* Not in the world or sub-communicator lists yet, so abort_comms did not see it. */
    (void)c->nccl->ncclCommAbort(comm);""", """    /* Not in the world or sub-communicator lists yet, so abort_comms did not see it. */""")]),
]
