# wheelfactory-network: host
# A CUDA toolkit layer from Debian's non-free archive (nvidia-cuda-toolkit), for CUDA variants
# whose toolkit NVIDIA does not publish as wheels (12.x) when the base is made from Debian
# ([build] debian_base): trixie packages 12.4. Debian's nvcc picks its supported gcc itself;
# CUDA_HOME is /usr (Debian's layout). Rendered by factory/wheelfactory/images/dockerfiles.py (render_image).
FROM {{base}}
RUN printf 'deb %s %s main contrib non-free non-free-firmware\n' '{{debian_mirror}}' '{{debian_suite}}' \
      > /etc/apt/sources.list \
 && rm -f /etc/apt/sources.list.d/debian.sources \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && nvcc --version | grep -q "release {{toolkit_version}}"
ENV CUDA_HOME=/usr
{{labels}}
