# Turns a CUDA kernel file into C++ for the CUDA emulation (cuda_emu.h), at build time:
#   cmake -DIN=nn/nn_cuda_kernels.cu -DOUT=.../nn_cuda_kernels.cpp -P cuda_emu_rewrite.cmake
# Each launch `NAME<<<CONFIG>>>(ARGS)` becomes `hs_emu_launch(NAME, hs_emu_cfg(CONFIG), ARGS)`,
# NAME being an identifier with at most one template argument list (reduce_partial<kSumDy>). The
# rest of the file is left as it is, and a #line directive keeps compiler messages and __LINE__ on
# the .cu file's own lines. A `<<<` that is left over (a launch written in a form this does not
# know) fails the build, so that no kernel escapes the emulated tests unnoticed.
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DIN=kernels.cu -DOUT=kernels.cpp -P cuda_emu_rewrite.cmake")
endif()
file(READ "${IN}" src)

string(REGEX MATCHALL "<<<" launches "${src}")
list(LENGTH launches n_launches)

# A launch is one statement, so the configuration cannot hold a ';': this keeps each match to one
# launch. Launches without arguments first, so that no dangling comma is left. Only blanks may
# stand between `>>>` and `(`, so that every line keeps its number.
set(name "([A-Za-z_][A-Za-z0-9_]*(<[^<>;]*>)?)")
string(REGEX REPLACE "${name}<<<([^;]*)>>>[ \t]*\\([ \t]*\\)"
       "hs_emu_launch(\\1, hs_emu_cfg(\\3))" src "${src}")
string(REGEX REPLACE "${name}<<<([^;]*)>>>[ \t]*\\("
       "hs_emu_launch(\\1, hs_emu_cfg(\\3), " src "${src}")

string(FIND "${src}" "<<<" left)
if(NOT left EQUAL -1)
  string(SUBSTRING "${src}" 0 ${left} before)
  string(REGEX MATCHALL "\n" newlines "${before}")
  list(LENGTH newlines line)
  math(EXPR line "${line} + 1")
  message(FATAL_ERROR "${IN}:${line}: a kernel launch the CUDA emulation cannot rewrite "
                      "(tests/cuda_emu/cuda_emu_rewrite.cmake): write it as "
                      "name<<<config>>>(args) on its own statement")
endif()
string(REGEX MATCHALL "hs_emu_launch\\(" rewritten "${src}")
list(LENGTH rewritten n_rewritten)
if(NOT n_rewritten EQUAL n_launches)
  message(FATAL_ERROR "${IN}: ${n_launches} launches, ${n_rewritten} rewritten")
endif()

file(WRITE "${OUT}.tmp" "#include \"cuda_emu.h\"\n#line 1 \"${IN}\"\n${src}")
file(RENAME "${OUT}.tmp" "${OUT}")
