# Sourced by the scripts that run carried binaries on the lent GPU machines: puts the folder named
# by $1 (the carried binaries and libsentencepiece) and the CUDA libraries the machines keep in
# Python wheels (cuDNN, NCCL, cuBLAS) on LD_LIBRARY_PATH, and keeps NVLink multicast off
# (../shared/gpu-machine.md). Harmless on a machine without them.
export LD_LIBRARY_PATH=$1:${LD_LIBRARY_PATH:-}
if python3 -c "import nvidia" 2>/dev/null; then
    SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:$LD_LIBRARY_PATH
fi
export NCCL_NVLS_ENABLE=0
