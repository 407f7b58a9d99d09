# Cross compilers for a base made on another arch (steps of debian-manylinux.Dockerfile, rendered
# by factory/wheelfactory/images/base_image.py). Under QEMU user emulation a compile is ~10x slower than
# native; these are the suite's own {{host}} gcc and binutils targeting {{target}}, which the kernel
# runs natively inside this {{target}} image. The engine puts {{prefix}}/bin first on PATH, so that only
# what must run as the image's arch runs emulated (Python, the smoke test, the project's tests).
# Debian's cross packages cannot be co-installed with the native compiler (same file names, arch-all
# sysroot packages an amd64 package cannot depend on in a foreign-arch root), so: the libraries
# that are Multi-Arch: same are installed by dpkg as {{host_debian}}; the toolchain and its sysroot
# are unpacked under {{prefix}}; its private libraries are linked where the {{host}} loader looks.
# What apt fetches and unpacks was done natively beforehand (docker/cross-toolchain-fetch.sh, in a
# {{host}} container of the same suite): emulated, apt and dpkg-deb took ~55 s of this step. The
# Python layout's venv comes from there too (Debian's venv files are the same on every arch).
COPY {{native}}/cross/ {{prefix}}/
COPY {{native}}/same/ /tmp/cross-same/
COPY {{native}}/venv/ /opt/python/{{abi}}-{{abi}}/
RUN dpkg --add-architecture {{host_debian}} \
 && dpkg -i /tmp/cross-same/*.deb >/dev/null \
 && rm -rf /tmp/cross-same \
 && for lib in {{prefix}}/usr/lib/{{host_triplet}}/*.so*; do \
      [ -e "/usr/lib/{{host_triplet}}/${lib##*/}" ] || ln -s "$lib" /usr/lib/{{host_triplet}}/; done \
 && ln -s {{prefix}}/usr/{{target}} /usr/{{target}} \
 && mkdir -p {{prefix}}/bin \
 && for tool in gcc g++; do ln -s "../usr/bin/{{target}}-$tool" "{{prefix}}/bin/{{target}}-$tool"; done \
 && ln -s {{target}}-gcc {{prefix}}/bin/gcc && ln -s {{target}}-gcc {{prefix}}/bin/cc \
 && ln -s {{target}}-g++ {{prefix}}/bin/g++ && ln -s {{target}}-g++ {{prefix}}/bin/c++ \
 && echo {{host}} > {{prefix}}/runs-on \
 && {{prefix}}/bin/c++ --version | head -n1 \
 && printf '#include <vector>\nint main() { return std::vector<int>(2).size() - 2; }\n' > /tmp/cross-check.cc \
 && {{prefix}}/bin/c++ -O2 /tmp/cross-check.cc -o /tmp/cross-check && /tmp/cross-check \
 && rm /tmp/cross-check.cc /tmp/cross-check
