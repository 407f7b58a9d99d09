# wheelfactory-network: host
# Debian's hipcc (HIP 5.2, clang 15) on a base, for compile checks of hipified device code where
# no ROCm toolchain image or ROCm torch is reachable. Rendered by factory/wheelfactory/verify/rocm_device_code.py.
FROM {{base}}
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends hipcc rocm-device-libs \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
{{labels}}
