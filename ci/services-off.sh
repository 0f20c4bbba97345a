# Sourced by ci/setup: with_services_off CMD... runs CMD (an apt-get
# install) while /usr/sbin/policy-rc.d refuses to start services, so the
# packaged etcd does not start. A policy-rc.d the machine already had is
# moved aside first and put back afterwards, the same file, whether CMD
# succeeded or not. Uses "${sudo_cmd[@]}" when set; POLICY_RC_D names
# another file (the tests).

policy_rc_d=${POLICY_RC_D:-/usr/sbin/policy-rc.d}

with_services_off() {
  local sudo=("${sudo_cmd[@]+"${sudo_cmd[@]}"}")
  local kept=""
  if "${sudo[@]}" test -e "$policy_rc_d" -o -L "$policy_rc_d"; then
    kept="$policy_rc_d.ci-setup-kept.$$"
    "${sudo[@]}" mv "$policy_rc_d" "$kept" || return
  fi
  local rc=0
  if "${sudo[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" > "$1" && chmod +x "$1"' sh "$policy_rc_d"; then
    "$@" || rc=$?
  else
    rc=$?
  fi
  "${sudo[@]}" rm -f "$policy_rc_d"
  if [ -n "$kept" ]; then
    "${sudo[@]}" mv "$kept" "$policy_rc_d" || rc=$?
  fi
  return $rc
}
