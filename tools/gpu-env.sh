# Source this on the GPU machine before running a carried hetsim build:
#   . ./gpu-env.sh && ./hetsim doctor
# It points hetsim at cuDNN, NCCL and cuBLAS from the pip `nvidia-*` wheels when they are
# installed (nvidia-cudnn-cu13, nvidia-nccl-cu13, nvidia-cublas), and puts those wheel folders
# on LD_LIBRARY_PATH, so that cuDNN's own sub-libraries and their dependencies resolve too, and
# the bundle's lib/ (shared libraries carried with the build) only where this machine lacks one
# of them. Variables already set are kept. hetsim finds the CUDA install (/usr/local/cuda/lib64)
# without help; see docs/gpu.md.
_hs_here=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)

# Python site folders: the interpreter's own answer when python3 runs, then the usual places.
_hs_sites=""
if command -v python3 >/dev/null 2>&1; then
  _hs_sites=$(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
fi
_hs_d=${HETSIM_PYTHON_SITE:-} # (sourced by scripts under set -u too)
for _hs_d in ${_hs_d//:/ } ${VIRTUAL_ENV:+$VIRTUAL_ENV/lib/python3*/site-packages} \
    ${CONDA_PREFIX:+$CONDA_PREFIX/lib/python3*/site-packages} "${HOME:-/root}"/.local/lib/python3*/site-packages \
    /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages /usr/lib/python3/dist-packages; do
  [ -d "$_hs_d" ] && _hs_sites="$_hs_sites
$_hs_d"
done

# _hs_find SONAME: the first wheel folder (site/nvidia/*/lib) holding SONAME.
_hs_find() {
  local site f
  while IFS= read -r site; do
    [ -n "$site" ] || continue
    for f in "$site"/nvidia/*/lib/"$1"; do
      [ -e "$f" ] && { dirname "$f"; return 0; }
    done
  done <<<"$_hs_sites"
  return 1
}

_hs_ld=""
# The bundle's lib/ (the build machine's libstdc++ and libgcc_s, say) goes on the path only when
# this machine lacks one of them: hetsim needs nothing newer than any copy has (CXXABI_1.3,
# GCC_3.0), while cuDNN, NCCL, PyTorch and the machine's own programs may need the newer copy
# a newer system has, and LD_LIBRARY_PATH would put the carried one before it for every process.
if [ -d "$_hs_here/lib" ]; then
  _hs_sys=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null)
  for _hs_d in "$_hs_here"/lib/*; do
    [ -e "$_hs_d" ] || continue
    _hs_so=${_hs_d##*/}
    if ! grep -q "^[[:space:]]*$_hs_so " <<<"$_hs_sys" &&
        ! ls /lib/*-linux-gnu/"$_hs_so" /usr/lib/*-linux-gnu/"$_hs_so" /lib64/"$_hs_so" /usr/lib64/"$_hs_so" >/dev/null 2>&1; then
      _hs_ld="$_hs_here/lib"
      echo "hetsim: this machine has no $_hs_so: the bundle's lib/ goes on LD_LIBRARY_PATH" >&2
    fi
  done
  [ -n "$_hs_ld" ] || echo "hetsim: this machine has every library of the bundle's lib/: not put on LD_LIBRARY_PATH" >&2
fi
for _hs_pair in HETSIM_CUDNN_PATH:libcudnn.so.9 HETSIM_NCCL_PATH:libnccl.so.2 HETSIM_CUBLAS_PATH:libcublas.so.13; do
  _hs_var=${_hs_pair%%:*}
  _hs_so=${_hs_pair#*:}
  if [ -z "${!_hs_var:-}" ] && _hs_dir=$(_hs_find "$_hs_so"); then
    export "$_hs_var=$_hs_dir"
  fi
  [ -n "${!_hs_var:-}" ] && _hs_ld="$_hs_ld:${!_hs_var}"
  echo "hetsim: $_hs_var=${!_hs_var:-(unset: the CUDA install or the loader path)}" >&2
done
# cuBLASLt and the CUDA 13 wheels' shared folder (nvidia/cu13/lib), which cuDNN needs.
if _hs_dir=$(_hs_find libcublasLt.so.13); then _hs_ld="$_hs_ld:$_hs_dir"; fi
# The driver's libcuda.so.1 where the loader does not find it (a container with the driver
# mounted at /usr/local/nvidia and no ldconfig entry): at the end of the path.
if ! { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  for _hs_d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/wsl/lib; do
    case ":${LD_LIBRARY_PATH:-}:" in *":$_hs_d:"*) continue ;; esac
    if [ -e "$_hs_d/libcuda.so.1" ]; then
      _hs_tail="$_hs_d"
      echo "hetsim: libcuda.so.1 from $_hs_d (not on the loader's path)" >&2
      break
    fi
  done
fi
_hs_ld=${_hs_ld#:}
if [ -n "$_hs_ld" ]; then export LD_LIBRARY_PATH="$_hs_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
if [ -n "${_hs_tail:-}" ]; then export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$_hs_tail"; fi
unset _hs_here _hs_sites _hs_sys _hs_d _hs_ld _hs_pair _hs_var _hs_so _hs_dir _hs_tail
unset -f _hs_find
