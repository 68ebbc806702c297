#!/usr/bin/env python3
"""Local rehearsal of a rendered EKS deployment (run through scripts/rehearse-deploy.sh).

Renders APP + INFRA with `moerl deploy render`, reads back from the rendered YAML what each
container runs (tools/k8s-schemas/rehearse-plan.js: argv + env as the manifests set them,
Secret refs and $(VAR)s resolved) and runs Redis, the trainer group (one `moerl launch
--nproc-per-node G` per trainer node pod, the operator's node rank / node count / master in
its env) and N rollout instances (each a `moerl launch --nproc-per-node M` pod) as local
processes with that argv and env. Only what cannot be the same on one machine is replaced, and
every replacement is printed: the in-cluster Redis address -> 127.0.0.1:<free port> (same
password from the Secret the same way, same AOF flags), the ConfigMap mount -> its copy on
disk, the image's `moerl` -> the build's binary, the GPU -> the CPU (model.device, dtypes,
ep.backend fabric), FI_PROVIDER=efa -> tcp on loopback, the master pod's address -> 127.0.0.1,
each role's Prometheus port -> a free one on 127.0.0.1, the S3 endpoint -> the S3 test server
on loopback (same bucket and prefix; or a local store dir with --store local), and the job's
size -> fewer node pods and ranks (--nproc-per-node rewritten; ep.size and rollout.ep_size to
match) and a few `--set` overrides appended to each role's args (the same mechanism the
manifests use for runtime.queue_url). Then checks that the job trained (rehearse_checks.py).
Every child gets PR_SET_PDEATHSIG and is stopped in a `finally`, so nothing outlives a failure.
"""
import argparse
import ctypes
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib

from rehearse_checks import check_trained

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What a 2-core machine can train in seconds: a tiny model of the same architecture, a few
# short steps. Everything else in the rendered config (task, algorithm, runtime, store, ep)
# stays as rendered.
SCALE_DOWN = [
    "model.hidden_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2",
    "model.num_key_value_heads=1", "model.num_experts=8", "model.num_experts_per_tok=2",
    "model.moe_intermediate_size=32", "model.max_position_embeddings=256",
    "algorithm.group_size=4", "rollout.prompts_per_step=4", "rollout.max_new_tokens=16",
    "train.steps=4", "train.checkpoint_every=2", "train.micro_batch_size=64",
    "train.eval_prompts=8", "train.threads=1",
    # A model this small, from scratch, earns no reward at all: a short SFT warm start and
    # the task's format reward give the RL steps a non-zero signal to train on.
    "train.sft_steps=40", "task.format_reward=0.2",
]


class Stop(Exception):
    pass


def note(msg):
    print(f"rehearse-deploy: {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no child outlives this runner


def on_signal(signum, frame):
    raise Stop(f"signal {signum}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", default=f"{ROOT}/examples/deploy/small/app.toml")
    ap.add_argument("--infra", default=f"{ROOT}/examples/deploy/small/infra.toml")
    ap.add_argument("--moerl", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--set", action="append", default=[], dest="sets",
                    help="extra KEY=VALUE for every role (after the scale-down)")
    ap.add_argument("--no-scale-down", action="store_true", help="run the rendered job at full size")
    ap.add_argument("--store", choices=["s3", "local"], default="s3")
    ap.add_argument("--rollout-workers", type=int, default=2, help="rollout instance pods to run")
    ap.add_argument("--trainer-nodes", type=int, default=2, help="trainer node pods to run (at most the rendered count)")
    ap.add_argument("--trainer-ranks", type=int, default=1, help="ranks per trainer node (--nproc-per-node, at most rendered)")
    ap.add_argument("--rollout-ranks", type=int, default=2, help="ranks per rollout instance (at most rendered)")
    ap.add_argument("--timeout", type=float, default=110, help="deadline for the whole job, seconds")
    a = ap.parse_args()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    start = time.time()
    deadline = start + a.timeout
    work = a.work
    procs = {}
    logs = {}
    try:
        ok = rehearse(a, work, procs, logs, deadline)
    except Stop as e:
        note(f"stopped by {e}")
        ok = False
    except Exception as e:  # noqa: BLE001 - report, clean up, fail
        note(f"error: {e}")
        ok = False
    finally:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        stop_all(procs)
    if not ok:
        for name, path in logs.items():
            if os.path.exists(path):
                lines = open(path, errors="replace").readlines()[-25:]
                print(f"----- {name}: {path} (last {len(lines)} lines)")
                print("".join(lines), end="")
    note(f"{'PASS' if ok else 'FAIL'} in {time.time() - start:.1f} s")
    return 0 if ok else 1


def stop_all(procs):
    for p in procs.values():
        if p.poll() is None:
            p.terminate()
    end = time.time() + 5
    for p in procs.values():
        try:
            p.wait(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def spawn(procs, logs, name, argv, env, cwd, work, stdin=None, stdout=None):
    logs[name] = f"{work}/{name}.log"
    os.makedirs(cwd, exist_ok=True)
    out = stdout if stdout is not None else open(logs[name], "w")
    procs[name] = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT if stdout is None else open(logs[name], "w"),
                                   preexec_fn=die_with_parent)
    return procs[name]


def wait_port(port, deadline, what):
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.time() > deadline:
                raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} in time")
            time.sleep(0.1)


def rehearse(a, work, procs, logs, deadline):
    moerl = os.path.abspath(a.moerl)
    # 1. Render, exactly as a user would.
    rendered = f"{work}/rendered"
    r = subprocess.run([moerl, "deploy", "render", "--app", a.app, "--infra", a.infra, "--out", rendered],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"moerl deploy render failed:\n{r.stderr}")
    note(f"rendered {a.app} + {a.infra} -> {rendered}")
    # 2. Read back what each container runs from the YAML.
    r = subprocess.run(["node", f"{ROOT}/tools/k8s-schemas/rehearse-plan.js", rendered], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"rehearse-plan.js failed:\n{r.stderr}")
    plan = json.loads(r.stdout)
    open(f"{work}/plan.json", "w").write(r.stdout)
    app_doc = tomllib.loads(plan["app_toml"])
    app_local = f"{work}/app.toml"
    open(app_local, "w").write(plan["app_toml"])  # the ConfigMap's app.toml, byte for byte
    trainers = [x for x in plan["roles"] if x["name"] == "trainer"]
    rollouts = [x for x in plan["roles"] if x["name"] == "rollout"]
    if not trainers or not rollouts or not plan["redis"]:
        raise RuntimeError("the rendered manifests lack a trainer, rollout or redis role")
    rollout = rollouts[0]
    base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "TMPDIR": f"{work}/tmp",
                "LANG": "C.UTF-8"}
    os.makedirs(base_env["TMPDIR"], exist_ok=True)

    # 3. Store: the S3 test server holding the rendered bucket, or a local directory.
    store_uri = (app_doc.get("store") or {}).get("uri", "") if isinstance(app_doc.get("store"), dict) else app_doc.get("store", "")
    store_env = {}
    store_sets = []
    if a.store == "s3":
        if not store_uri.startswith("s3://"):
            raise RuntimeError(f"the rendered app's store is '{store_uri}', not s3://; use --store local")
        bucket = store_uri[5:].split("/", 1)[0]
        p = spawn(procs, logs, "s3", ["node", "--openssl-legacy-provider", f"{ROOT}/tools/s3/server.js", "--port", "0",
                                      "--dir", f"{work}/s3", "--bucket", bucket],
                  dict(base_env), work, work, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = ""
        while not line.startswith("S3_TEST_SERVER_PORT="):
            line = p.stdout.readline().decode().strip()
            if not line and p.poll() is not None:
                raise RuntimeError("the S3 test server exited at start (scripts/install-deps.sh installs tools/s3)")
            if time.time() > deadline:
                raise RuntimeError("the S3 test server did not start in time")
        endpoint = f"http://127.0.0.1:{int(line.split('=')[1])}"
        threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()  # never let the pipe fill
        store_env = {"AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                     "AWS_EC2_METADATA_DISABLED": "true"}
        note(f"store: {store_uri} unchanged; S3 endpoint -> S3 test server {endpoint} (bucket {bucket}), "
             "credentials -> its dummy key pair instead of IRSA")
    else:
        store_sets = [f"store.uri={work}/store"]
        note(f"store: {store_uri} -> local directory {work}/store (--set store.uri)")

    # 4. Redis as the StatefulSet runs it: same command, flags and Secret env; port, dir and
    # bind changed. The password must be on no argv (the server reads it from stdin).
    redis_port = free_port()
    argv = list(plan["redis"]["argv"])
    argv[argv.index("--port") + 1] = str(redis_port)
    argv[argv.index("--dir") + 1] = f"{work}/redis"
    argv += ["--bind", "127.0.0.1"]
    os.makedirs(f"{work}/redis", exist_ok=True)
    redis_env = dict(plan["redis"]["env"])
    pw = redis_env.get("REDISCLI_AUTH", "")
    if not pw:
        raise RuntimeError("the rendered Redis gets no password (env REDISCLI_AUTH from the Secret)")
    for role in [{"name": "redis", "argv": argv, "env": {}}] + plan["roles"]:
        if any(pw in x for x in role["argv"]):
            raise RuntimeError(f"the Redis password is on the argv of {role['name']}")
    note(f"redis: {' '.join(shlex.quote(x) for x in argv)}  (port, dir -> this machine; bind 127.0.0.1); "
         "password from the Secret in env REDISCLI_AUTH, on no argv")
    spawn(procs, logs, "redis", argv, {**base_env, **redis_env}, f"{work}/redis", work)
    wait_port(redis_port, deadline, "redis-server")
    probe = plan["redis"]["probe"]
    if probe:  # the readiness probe as rendered, against this server
        probe = [x.replace("redis-cli", f"redis-cli -p {redis_port}", 1) for x in probe]
        ok = subprocess.run(probe, env={**base_env, **redis_env}, capture_output=True).returncode == 0
        note(f"redis readiness probe (rendered, -p {redis_port} added): {'passed' if ok else 'FAILED'}")
        if not ok:
            raise RuntimeError("the rendered readiness probe fails against the rendered Redis")
    # The password reached the server: a client without it is refused.
    anon = subprocess.run(["redis-cli", "-p", str(redis_port), "ping"], env=base_env, capture_output=True, text=True)
    if "NOAUTH" not in anon.stdout + anon.stderr:
        raise RuntimeError(f"the rendered Redis answers clients without the password: {anon.stdout.strip()}")
    note("redis refuses a client without the password (NOAUTH)")

    service = f'{plan["redis"]["service"]}:{plan["redis"]["port"]}'
    local = f"127.0.0.1:{redis_port}"
    # The trainer group: one launcher per node pod (PyTorchJob Master = node 0, Workers 1..;
    # Job / JobSet pods by completion index), each `moerl launch --nproc-per-node G`.
    nodes = sorted(((role, role.get("first_node", 0) + i) for role in trainers for i in range(role["replicas"])),
                   key=lambda x: x[1])
    for role in trainers:
        if not role["launch"]:
            raise RuntimeError(f"the trainer pod runs {role['argv'][:2]}, not `moerl launch --nproc-per-node G`")
    gpus = trainers[0]["launch"]["nproc_per_node"]
    inst = rollout["launch"]["nproc_per_node"] if rollout["launch"] else 1
    if a.no_scale_down:
        num_nodes, ranks, rollout_ranks = len(nodes), gpus, inst
    else:
        num_nodes, ranks, rollout_ranks = min(len(nodes), a.trainer_nodes), min(gpus, a.trainer_ranks), min(inst, a.rollout_ranks)
    rendered_nodes = len(nodes)
    nodes = nodes[:num_nodes]
    world = num_nodes * ranks
    note(f"trainer group: {num_nodes} node pod(s) x {ranks} rank(s) = {world} ranks, one launcher per pod "
         f"(rendered {rendered_nodes} x {gpus}); "
         f"rollout instances of {rollout_ranks} rank(s) (rendered {inst})")
    shape = [f"ep.size={world}", f"rollout.ep_size={rollout_ranks}"]
    # No GPU here: the roles run on the CPU, and the EP data plane on libfabric's tcp provider
    # over lo (the launcher sets FI_TCP_IFACE=lo for a loopback master).
    backend = (app_doc.get("ep") or {}).get("backend", "")
    cpu = ["model.device=cpu", "model.dtype=float32", "model.rollout_dtype=float32"]
    if backend in ("nccl", "cuda_ipc") or world > 1 or rollout_ranks > 1:
        cpu.append("ep.backend=fabric")
    note(f"no GPU: {' '.join(cpu)} (appended as --set), FI_PROVIDER=tcp on lo for every role "
         f"(rendered ep.backend {backend or 'default'})")
    scale = ([] if a.no_scale_down else SCALE_DOWN) + shape
    if not a.no_scale_down:
        note(f"scale-down for this machine (appended as --set, like the manifests' own overrides): {' '.join(scale)}")
    master_port = free_port()
    note("metrics: the rendered metrics.prometheus_port -> 0 on 127.0.0.1 (each role takes a free port, logged); "
         "final_scrape_wait_s = 0 (no Prometheus scrapes the rehearsal)")

    def command(role, nproc):
        out = [x.replace(plan["app_path"], app_local).replace(service, local) for x in role["argv"]]
        # Every pod has its own IP; on one machine the roles share one: each takes a free port.
        out = ["metrics.prometheus_port=0" if x.startswith("metrics.prometheus_port=") else x for x in out]
        out += ["--set", "metrics.prometheus_host=127.0.0.1", "--set", "metrics.final_scrape_wait_s=0"]
        if out[0] != "moerl":
            raise RuntimeError(f"{role['name']} runs {out[0]}, expected the image's moerl")
        out[0] = moerl  # the launcher runs the ranks' `moerl` as itself
        if role["launch"]:
            out[out.index("--nproc-per-node") + 1] = str(nproc)
        for kv in scale + cpu + store_sets + a.sets:
            out += ["--set", kv]
        return out

    def environment(role, pod, node=0):
        env = dict(base_env)
        env.update(role["env"])
        env.update(store_env)
        env["OMP_NUM_THREADS"] = "1"  # several processes on a 2-core box
        if env.get("FI_PROVIDER", "efa") == "efa":  # EFA, or a GPU pod that names none (NCCL)
            env.update(FI_PROVIDER="tcp", FI_TCP_IFACE="lo")
            env.pop("FI_EFA_USE_DEVICE_RDMA", None)
        for inj in role["injected"]:
            if inj.get("fieldPath") == "metadata.name":  # the downward API: each pod's own name
                env[inj["name"]] = pod
            if "job-completion-index" in inj.get("fieldPath", ""):
                env[inj["name"]] = str(node)
        # The group's rendezvous as the operator (or the rendered env) gives it, on loopback.
        if any(inj["name"] in ("MASTER_ADDR", "RANK") for inj in role["injected"]) or "MASTER_ADDR" in env:
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), WORLD_SIZE=str(num_nodes), RANK=str(node))
            if any(inj["name"].startswith("PET_") for inj in role["injected"]):
                env.update(PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=str(master_port), PET_NNODES=str(num_nodes),
                           PET_NODE_RANK=str(node), PET_NPROC_PER_NODE="1")
        return env

    def show(role, nproc):
        c = " ".join(command(role, nproc))
        return c.replace(pw, "<secret>") if pw else c

    def show_env(role):
        e = dict(role["env"])
        for k in e:
            if pw and pw in e[k]:
                e[k] = e[k].replace(pw, "<secret>")
        return json.dumps(e)

    trainer = nodes[0][0]
    note(f"trainer: {show(trainer, ranks)}")
    note(f"trainer env (rendered): {show_env(trainer)}; here FI_PROVIDER=tcp on lo, the group's rendezvous at "
         f"127.0.0.1:{master_port}, WORLD_SIZE={num_nodes} (nodes) and RANK=<node> as the operator sets them per pod")
    trainer_names = []
    for role, node in nodes:
        name = "trainer" if node == 0 else f"trainer-{node}"  # node 0 holds the run dir the checks read
        trainer_names.append(name)
        spawn(procs, logs, name, command(role, ranks), environment(role, f"moerl-trainer-{node}", node), f"{work}/{name}", work)
    for i in range(a.rollout_workers):
        if i == 0:
            note(f"rollout x{a.rollout_workers}: {show(rollout, rollout_ranks)}")
            note(f"rollout env (rendered): {show_env(rollout)}")
        spawn(procs, logs, f"rollout-{i}", command(rollout, rollout_ranks), environment(rollout, f"moerl-rollout-{i}"),
              f"{work}/rollout-{i}", work)

    # 5. Wait for the trainer group (deadline); any other process failing is a failure.
    while any(procs[n].poll() is None for n in trainer_names):
        if time.time() > deadline:
            note(f"trainer still running at the deadline ({a.timeout:.0f} s)")
            return False
        for name, p in procs.items():
            # A worker may leave with 0 once the trainer marks the run done (drained).
            if p.poll() is not None and (name in ("redis", "s3") or p.returncode != 0):
                note(f"{name} exited {p.returncode} while the trainer group ran")
                return False
        time.sleep(0.2)
    ok = True
    for n in trainer_names:
        note(f"{n} exited {procs[n].returncode}")
        ok = ok and procs[n].returncode == 0
    # Rollout workers leave on their own once the trainer marks the run done; otherwise they
    # stop the way Kubernetes stops them: SIGTERM, then the grace period (bounded by the deadline).
    grace = rollout.get("grace_seconds") or 90
    settle = time.time() + 10
    for name, p in procs.items():
        if name.startswith("rollout"):
            try:
                p.wait(timeout=max(0.1, min(settle, deadline) - time.time()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)
                note(f"{name}: SIGTERM (still running after the trainer finished)")
    for name, p in procs.items():
        if name.startswith("rollout"):
            try:
                p.wait(timeout=max(0.1, min(time.time() + grace, deadline) - time.time()))
                note(f"{name} exited {p.returncode}")
                ok = ok and p.returncode == 0
            except subprocess.TimeoutExpired:
                note(f"{name} did not exit within its grace period / the deadline")
                ok = False
    return check_trained(work, moerl, store_uri if a.store == "s3" else f"{work}/store", world,
                         dict(base_env, **store_env, AWS_REGION=trainer["env"].get("AWS_REGION", "us-east-1"))) and ok


if __name__ == "__main__":
    sys.exit(main())
