#!/usr/bin/env bash
# Local rehearsal of a rendered EKS deployment: renders APP + INFRA with `moerl deploy render`,
# reads back what each container would run (tools/k8s-schemas/rehearse-plan.js: argv + env
# exactly as the manifests set them, Secret refs and $(VAR)s resolved), and runs Redis, one
# trainer and N rollout workers as local processes with that env. Only what cannot exist on
# one machine is replaced, and each replacement is printed: the in-cluster Redis address ->
# 127.0.0.1:<free port>, /etc/moerl/app.toml -> the ConfigMap's copy on disk, FI_PROVIDER=efa
# -> tcp on loopback, the S3 store -> a local directory (or REHEARSE_STORE), and the
# rendezvous env the PyTorchJob operator injects -> a single-node 127.0.0.1 rendezvous.
#
# Usage: scripts/rehearse-deploy.sh --app APP.toml [--infra INFRA.toml] [--build BUILD]
#        env: REHEARSE_ROLLOUT_WORKERS (2), REHEARSE_TIMEOUT_S (900), REHEARSE_STORE (local dir),
#             REHEARSE_KEEP=1 keeps the work directory.
# Exit 0 when the trainer exits 0 and every rollout worker drains (SIGTERM) and exits 0.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
app="" infra="$here/examples/deploy/small/infra.toml" build="$here/build"
while (($#)); do
  case "$1" in
    --app) app=$2; shift 2 ;;
    --infra) infra=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "rehearse-deploy: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$app" ] || { echo "rehearse-deploy: --app APP.toml is required (a config small enough to train on this machine)" >&2; exit 2; }
moerl=${MOERL_BIN:-$build/src/cli/moerl}
[ -x "$moerl" ] || { echo "rehearse-deploy: no moerl binary at $moerl (build first or set MOERL_BIN)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "rehearse-deploy: redis-server not found (scripts/install-deps.sh)" >&2; exit 2; }

work=$(mktemp -d /tmp/moerl-rehearse.XXXXXX)
[ "${REHEARSE_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

# The manifests need an S3 store in INFRA's bucket; render with one, then run against a local store.
python3 - "$app" "$infra" "$work/app-render.toml" <<'PY'
import re, sys, tomllib
app_path, infra_path, out = sys.argv[1:]
text = open(app_path).read()
infra = tomllib.load(open(infra_path, "rb"))
bucket = infra.get("s3", {}).get("bucket", "moerl-rehearsal")
prefix = infra.get("s3", {}).get("prefix", "rehearsal")
uri = f's3://{bucket}/{prefix}/rehearsal'
doc = tomllib.loads(text)
if isinstance(doc.get("store"), str):
    text = re.sub(r'(?m)^store\s*=.*$', f'store = "{uri}"', text, count=1)
elif isinstance(doc.get("store"), dict):
    text = re.sub(r'(?ms)(^\[store\].*?^uri\s*=\s*).*?$', lambda m: m.group(1) + f'"{uri}"', text, count=1)
else:
    text = f'store = "{uri}"\n' + text
open(out, "w").write(text)
PY

"$moerl" deploy render --app "$work/app-render.toml" --infra "$infra" --out "$work/rendered" >/dev/null
node "$here/tools/k8s-schemas/rehearse-plan.js" "$work/rendered" > "$work/plan.json"

python3 - "$work" "$moerl" "$app" <<'PY'
import json, os, signal, socket, subprocess, sys, time, tomllib
work, moerl, app_path = sys.argv[1:]
plan = json.load(open(f"{work}/plan.json"))
deadline_s = float(os.environ.get("REHEARSE_TIMEOUT_S", "900"))
n_rollout = int(os.environ.get("REHEARSE_ROLLOUT_WORKERS", "2"))
store = os.environ.get("REHEARSE_STORE", f"{work}/store")
doc = tomllib.load(open(app_path, "rb"))
store_key = "store.uri" if isinstance(doc.get("store"), dict) else "store"

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def note(msg):
    print(f"rehearse-deploy: {msg}", flush=True)

# Redis, as the StatefulSet runs it (AOF, password), on a loopback port and a temp dir.
redis_port = free_port()
argv = list(plan["redis"]["argv"])
argv[argv.index("--port") + 1] = str(redis_port)
argv[argv.index("--dir") + 1] = f"{work}/redis"
argv[argv.index("--maxmemory") + 1] = "512mb"
os.makedirs(f"{work}/redis")
argv += ["--bind", "127.0.0.1"]
note(f"redis: {' '.join(a if a else repr(a) for a in argv)}  (port, dir, maxmemory changed for this machine)")
procs = {"redis": subprocess.Popen(argv, stdout=open(f"{work}/redis.log", "w"), stderr=subprocess.STDOUT)}
t0 = time.time()
while True:
    try:
        with socket.create_connection(("127.0.0.1", redis_port), timeout=1):
            break
    except OSError:
        if time.time() - t0 > 20:
            sys.exit("rehearse-deploy: redis-server did not listen within 20 s; see redis.log")
        time.sleep(0.1)

app_local = f"{work}/app.toml"
open(app_local, "w").write(plan["app_toml"])
service = f'{plan["redis"]["service"]}:{plan["redis"]["port"]}'
local = f"127.0.0.1:{redis_port}"
master_port = free_port()

def command(role):
    out = []
    for a in role["argv"]:
        a = a.replace(plan["app_path"], app_local).replace(service, local)
        out.append(a)
    if out[0] == "moerl":
        out[0] = moerl
    return out + ["--set", f"{store_key}={store}"]

def environment(role, rank, world):
    env = dict(os.environ)
    env.update(role["env"])
    if env.get("FI_PROVIDER") == "efa":
        env.update(FI_PROVIDER="tcp", FI_TCP_IFACE="lo")
    for inj in role["injected"]:
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port), "WORLD_SIZE": str(world), "RANK": str(rank)}
                   if inj["name"] in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK") else {})
    return env

trainer = next(r for r in plan["roles"] if r["name"] == "trainer")
rollout = next(r for r in plan["roles"] if r["name"] == "rollout")
note(f"trainer: {' '.join(command(trainer))}")
note(f"trainer env: {json.dumps(trainer['env'])} (+ FI_PROVIDER=tcp on loopback, single-node rendezvous)")
procs["trainer"] = subprocess.Popen(command(trainer), env=environment(trainer, 0, 1),
                                    stdout=open(f"{work}/trainer.log", "w"), stderr=subprocess.STDOUT)
for i in range(n_rollout):
    note(f"rollout-{i}: {' '.join(command(rollout))}")
    procs[f"rollout-{i}"] = subprocess.Popen(command(rollout), env=environment(rollout, 0, 1),
                                             stdout=open(f"{work}/rollout-{i}.log", "w"), stderr=subprocess.STDOUT)

def stop_all():
    for name, p in procs.items():
        if p.poll() is None:
            p.kill()

ok = True
try:
    t0 = time.time()
    while procs["trainer"].poll() is None:
        if time.time() - t0 > deadline_s:
            note(f"trainer still running after {deadline_s:.0f} s (REHEARSE_TIMEOUT_S)")
            ok = False
            break
        for name, p in procs.items():
            if name.startswith("rollout") and p.poll() is not None and p.returncode != 0:
                note(f"{name} exited {p.returncode} while the trainer ran")
                ok = False
        time.sleep(0.5)
    rc = procs["trainer"].poll()
    note(f"trainer exited {rc}")
    ok = ok and rc == 0
    # Rollout workers stop the way Kubernetes stops them: SIGTERM, then the grace period.
    grace = rollout.get("grace_seconds") or 90
    for name, p in procs.items():
        if name.startswith("rollout") and p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for name, p in procs.items():
        if name.startswith("rollout"):
            try:
                p.wait(timeout=grace)
                note(f"{name} drained and exited {p.returncode}")
                ok = ok and p.returncode == 0
            except subprocess.TimeoutExpired:
                note(f"{name} did not exit within the {grace} s grace period")
                ok = False
finally:
    stop_all()
if not ok:
    for f in sorted(os.listdir(work)):
        if f.endswith(".log"):
            print(f"----- {f} (last 30 lines)")
            print("".join(open(f"{work}/{f}").readlines()[-30:]))
sys.exit(0 if ok else 1)
PY
