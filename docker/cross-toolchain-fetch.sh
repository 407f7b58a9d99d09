# The native half of docker/cross-toolchain.Dockerfile: run by factory/wheelfactory/images/base_image.py
# in a {{host}} container of the base's own Debian suite and mirror (its rootfs), with the network.
# Writes {{out}}/cross (the cross toolchain and its sysroot, unpacked), {{out}}/same (the {{host_debian}}
# libraries that are Multi-Arch: same, as .deb for dpkg in the {{target}} image) and {{out}}/venv (the
# /opt/python/{{abi}}-{{abi}} venv). Same packages as apt in the {{target}} image would take: the
# status file is empty, so every dependency is fetched.
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
debs=/tmp/cross-debs
mkdir -p $debs/partial /tmp/cross-state {{out}}/cross {{out}}/same
touch /tmp/cross-state/status
apt-get install -y -qq --download-only --no-install-recommends \
    -o Dir::State::status=/tmp/cross-state/status -o Dir::Cache::archives=$debs "g++-{{target}}" >/dev/null
for deb in $debs/*.deb; do
    if [ "$(dpkg-deb -f "$deb" Multi-Arch)" = same ] && [ "$(dpkg-deb -f "$deb" Architecture)" = {{host_debian}} ]
    then cp "$deb" {{out}}/same/
    else dpkg-deb -x "$deb" {{out}}/cross
    fi
done
python3 -m venv /opt/python/{{abi}}-{{abi}}
cp -a /opt/python/{{abi}}-{{abi}} {{out}}/venv
