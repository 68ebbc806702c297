#!/bin/sh
# Image entrypoint (after tini): reports the libfabric provider the process will get, then
# execs the command so signals reach moerl directly. Pods rendered by `moerl deploy render`
# call tini -> moerl themselves; this wrapper serves `docker run` and debugging shells.
set -e
if [ "${FI_PROVIDER:-}" = "efa" ] && command -v fi_info >/dev/null 2>&1; then
  if fi_info -p efa -t FI_EP_RDM >/dev/null 2>&1; then
    echo "moerl-entrypoint: libfabric efa provider available ($(fi_info -p efa -t FI_EP_RDM | grep -c 'domain:') domains)" >&2
  else
    echo "moerl-entrypoint: WARNING: FI_PROVIDER=efa but fi_info finds no EFA device (is vpc.amazonaws.com/efa requested?)" >&2
  fi
fi
[ "$#" -gt 0 ] || set -- moerl env
exec "$@"
