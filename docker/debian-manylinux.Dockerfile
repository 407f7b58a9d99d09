# wheelfactory-network: host
# An offline manylinux-layout base on a Debian rootfs made by debootstrap and imported into the
# engine (wheelfactory base-image). Rendered by factory/wheelfactory/images/base_image.py; the apt step needs the network.
FROM {{rootfs}}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      build-essential g++ python3 python3-venv python3-dev ninja-build ccache git ca-certificates file unzip \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*{{cross_toolchain}}
# The layout cibuildwheel expects: /opt/python/<abi>-<abi>/bin/python, here a venv of the distro
# Python, and /opt/python/cp39-cp39, which cibuildwheel runs its helper steps with.
RUN mkdir -p /opt/python \
 && {{make_venv}} \
 && if [ ! -e /opt/python/cp39-cp39 ]; then ln -s /opt/python/{{abi}}-{{abi}} /opt/python/cp39-cp39; fi \
 && /opt/python/cp39-cp39/bin/python -c "import sys, venv; print(sys.version)" \
 && test "$(ldd --version | head -n1 | awk '{print $NF}')" = "{{glibc}}"
ENV PATH=/opt/python/{{abi}}-{{abi}}/bin:$PATH
{{labels}}
