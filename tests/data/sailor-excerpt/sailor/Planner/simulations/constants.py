# Excerpt of eth-easl/sailor sailor/Planner/simulations/constants.py at commit
# cf2c8e3cc53ce178fe58a4003f46b4b6b848fc33 (MIT License, Copyright (c) 2023 - present | ETH
# Zurich; full text in traces/profiles/LICENSE.sailor): the GPU memory table only.

GPU_MEMORY_GB = {
    'V100-16': 16,
    'A100-40': 40,
    'A100-80': 80,
    'GH-96': 96,
    'Titan-RTX': 24,
    'RTX-2080': 11,
    'RTX-3090': 24
}
