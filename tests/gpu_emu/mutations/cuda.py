# Mutations of nn/nn_cuda.c that test_deviceless_gpu_nn should catch (run.py).
SOURCE = "nn/nn_cuda.c"
TEST = "test_deviceless_gpu_nn"
M = [
("C1", "a linear layer's forward reads W untransposed (the row-major [out][in] weights taken as column-major out x in)",
 [("sgemm(cn, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, w, in, x, in, 0.0f, y, out, i, d);",
   "sgemm(cn, CUBLAS_OP_N, CUBLAS_OP_N, out, B, in, w, out, x, in, 0.0f, y, out, i, d);")]),
("C2", "a linear layer's weight gradient is added to the last step's (beta 1) instead of overwriting it",
 [("x, in, dy, out, 0.0f, gw, in, i, d);", "x, in, dy, out, 1.0f, gw, in, i, d);")]),
("C3", "a linear layer's input gradient multiplies by W transposed the wrong way (W taken as column-major out x in)",
 [("sgemm(cn, CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, w, in, dy, out,",
   "sgemm(cn, CUBLAS_OP_T, CUBLAS_OP_N, in, B, out, w, out, dy, out,")]),
("C4", "a convolution's bias gradient is summed as a linear layer's (one pixel per channel, not over H x W)",
 [("hs_cuk_bias_grad(dy, gw + conv_wcount(l), cn->scratch, B, l->out_c, hw, s)",
   "hs_cuk_bias_grad(dy, gw + conv_wcount(l), cn->scratch, B, l->out_c, 1, s)")]),
("C5", "a convolution's input gradient overwrites what a later reader (a residual add) wrote instead of adding to it",
 [("float *target = acc ? cn->dscratch : dx;", "float *target = dx;"),
  ("if (!rc && acc)\n          rc = kern(hs_cuk_accumulate(dx, cn->dscratch",
   "if (0)\n          rc = kern(hs_cuk_accumulate(dx, cn->dscratch")]),
("C6", "batchnorm normalises with the running statistics in training",
 [("if (train)\n        rc = kern(hs_cuk_bn_forward_train", "if (0)\n        rc = kern(hs_cuk_bn_forward_train")]),
("C7", "batchnorm normalises with the batch statistics in evaluation (and moves the running ones)",
 [("if (train)\n        rc = kern(hs_cuk_bn_forward_train", "if (1)\n        rc = kern(hs_cuk_bn_forward_train")]),
("C8", "SGD drops the momentum",
 [("(float)o->momentum, (float)o->weight_decay", "0.0f, (float)o->weight_decay")]),
("C9", "SGD drops the weight decay",
 [("(float)o->momentum, (float)o->weight_decay", "(float)o->momentum, 0.0f")]),
("C10", "the cuBLAS workspace is set before the stream, and cublasSetStream resets it to the default pool "
        "(a captured step's SGEMM would allocate inside the capture)",
 [("""  if (!rc)
    rc = blas_err(cn, cn->blas->cublasSetStream(cn->cublas, cn->stream), "cublasSetStream", d);
""", ""),
  ("""                  "cublasSetWorkspace", d);
""", """                  "cublasSetWorkspace", d);
  if (!rc)
    rc = blas_err(cn, cn->blas->cublasSetStream(cn->cublas, cn->stream), "cublasSetStream", d);
""")]),
("C11", "strict math lets cuBLAS use TF32 tensor cores",
 [("(cublasMath_t)(CUBLAS_DEFAULT_MATH |", "(cublasMath_t)(CUBLAS_TF32_TENSOR_OP_MATH |")]),
("C12", "parameters and gradients are copied to the host with cudaMemcpy (the legacy stream, which does not wait for "
        "the net's non-blocking stream) and no wait for the net's work",
 [("""  if (!rc && bytes) rc = idle(cn, to_host ? "to the host" : "to the device", d);
  if (!rc && bytes)
    rc = cuda_err(to_host ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, cn->stream)""",
   """  if (!rc && bytes)
    rc = cuda_err(to_host ? cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost)""")]),
("C13", "a copy of the parameters or gradients moves n_params bytes, not n_params floats",
 [("size_t bytes = (size_t)n->n_params * sizeof(float);\n  CUcontext prev;",
   "size_t bytes = (size_t)n->n_params;\n  CUcontext prev;")]),
("C14", "the loss gradient is taken over the batch capacity, not the loaded batch",
 [("rc = kern(hs_cuk_xent_backward(cn->layers[last].y, cn->labels, B, n->classes,",
   "rc = kern(hs_cuk_xent_backward(cn->layers[last].y, cn->labels, cn->cap, n->classes,")]),
("C15", "growing the buffers frees the old ones before the new are allocated: a batch that does not fit leaves the "
        "net without buffers at the batch it held",
 [("""  cu_bufs b = {0};
  int64_t bytes = 0;
  int rc = 0;
""", """  cu_bufs b = {0};
  int64_t bytes = 0;
  int rc = net_wait(cn, NULL, "waiting for the stream (before new buffers)", d);
  if (!rc) held_free(cn);
""")]),
]
