# Mutations of the math filter in nn/nn_cuda_plan.c that test_deviceless_gpu_nn should catch
# (run.py): its cuda nets run in strict math and are compared with the cpu nets.
SOURCE = "nn/nn_cuda_plan.c"
TEST = "test_deviceless_gpu_nn"
M = [
("T1", "strict math admits TF32 tensor-core engines",
 [("(1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE) |", "")]),
("T2", "strict math admits non-deterministic engines (strict_is_deterministic: two passes differ by an ulp)",
 [("(1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) |", "")]),
]
