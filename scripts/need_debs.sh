#!/bin/sh
# need_debs.sh PACKAGE...: make sure these Debian packages are installed.
# Missing ones are installed with apt-get when we are root and may install (unless
# ONNXPORT_NO_APT=1); otherwise they are named in one line with the command to run, exit 2.
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${ONNXPORT_NO_APT:-0}" != 1 ]; then
	echo "installing Debian packages:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
		{ apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $missing >/dev/null; } ||
		{ echo "could not install:$missing" >&2; exit 2; }
	exit 0
fi
echo "missing Debian packages:$missing (install them: sudo apt-get install$missing)" >&2
exit 2
