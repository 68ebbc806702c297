#!/usr/bin/env node
// Reads a directory `moerl deploy render` wrote and prints, as JSON, exactly what each role's
// container would run: argv (after the tini wrapper; split into the `moerl launch` part and the
// role's argv each rank runs) and env, with Secret references and
// $(VAR) expansions resolved the way Kubernetes resolves them, plus the Redis server's argv
// and the app config from the ConfigMap. scripts/rehearse-deploy.sh runs that plan as local
// processes. Values Kubernetes or an operator injects at run time (PyTorchJob's MASTER_ADDR,
// RANK, ...; the completion index) are listed under "injected" for the runner to supply.
//   node rehearse-plan.js DIR
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const { podTemplates } = require('./lib/checks');

function load(dir) {
  const objs = [];
  const k8s = path.join(dir, 'k8s');
  for (const f of fs.readdirSync(k8s).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const d of YAML.parseAllDocuments(fs.readFileSync(path.join(k8s, f), 'utf8'))) {
      const o = d.toJS();
      if (o) objs.push(o);
    }
  }
  return objs;
}

// Kubernetes' $(VAR) expansion: defined names expand, $$ escapes, unknown refs stay as-is.
function expand(s, env) {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name) => {
    if (m === '$$') return '$';
    return Object.prototype.hasOwnProperty.call(env, name) ? env[name] : m;
  });
}

function containerPlan(c, secrets, configMaps) {
  const env = {};
  const injected = [];
  for (const e of c.env || []) {
    if (e.value !== undefined) env[e.name] = expand(String(e.value), env);
    else if (e.valueFrom && e.valueFrom.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const s = secrets[ref.name];
      if (!s || s[ref.key] === undefined) throw new Error(`env ${e.name}: Secret ${ref.name}/${ref.key} is not rendered`);
      env[e.name] = s[ref.key];
    } else if (e.valueFrom && e.valueFrom.configMapKeyRef) {
      env[e.name] = configMaps[e.valueFrom.configMapKeyRef.name][e.valueFrom.configMapKeyRef.key];
    } else if (e.valueFrom && e.valueFrom.fieldRef) {
      injected.push({ name: e.name, fieldPath: e.valueFrom.fieldRef.fieldPath });
    }
  }
  let argv = [...(c.command || []), ...(c.args || [])].map((a) => expand(a, env));
  if (argv[0] === 'tini') argv = argv.slice(argv.indexOf('--') + 1);  // PID-1 wrapper only
  // `moerl launch --nproc-per-node N ... -- moerl ROLE ...`: the pod's ranks come from the
  // launcher; role_argv is what each rank runs.
  let launch = null;
  let roleArgv = argv;
  if (argv[1] === 'launch') {
    const sep = argv.indexOf('--');
    const flags = argv.slice(2, sep);
    const n = flags.indexOf('--nproc-per-node');
    launch = { argv: argv.slice(0, sep), nproc_per_node: n >= 0 ? Number(flags[n + 1]) : null };
    roleArgv = argv.slice(sep + 1);
  }
  return { argv, launch, role_argv: roleArgv, env, injected };
}

function main() {
  const dir = process.argv[2];
  if (!dir) { process.stderr.write('usage: node rehearse-plan.js RENDERED_DIR\n'); process.exit(2); }
  const objs = load(dir);
  const secrets = {}, configMaps = {};
  for (const o of objs) {
    if (o.kind === 'Secret') secrets[o.metadata.name] = { ...(o.stringData || {}) };
    if (o.kind === 'ConfigMap') configMaps[o.metadata.name] = o.data || {};
  }
  const plan = { namespace: null, app_toml: null, app_path: null, redis: null, roles: [] };
  for (const o of objs) {
    if (o.kind === 'Namespace') plan.namespace = o.metadata.name;
    const component = ((o.metadata || {}).labels || {})['app.kubernetes.io/component'];
    for (const { where, tmpl } of podTemplates(o)) {
      const spec = tmpl.spec;
      const c = spec.containers[0];
      const p = containerPlan(c, secrets, configMaps);
      for (const v of spec.volumes || []) {
        if (v.configMap && configMaps[v.configMap.name]) {
          const mount = (c.volumeMounts || []).find((m) => m.name === v.name);
          plan.app_path = `${mount.mountPath}/app.toml`;
          plan.app_toml = configMaps[v.configMap.name]['app.toml'];
        }
      }
      if (component === 'redis') {
        const probe = ((c.readinessProbe || {}).exec || {}).command || null;
        plan.redis = { argv: p.argv, env: p.env, probe, port: (c.ports || [])[0].containerPort, service: `${o.metadata.name}.${o.metadata.namespace}.svc.cluster.local` };
        continue;
      }
      if (component !== 'trainer' && component !== 'rollout') continue;
      let replicas = 1;
      if (o.kind === 'Deployment') replicas = o.spec.replicas;
      else if (o.kind === 'PyTorchJob') replicas = o.spec.pytorchReplicaSpecs[where.split('/')[3]].replicas;
      else if (o.kind === 'Job') replicas = o.spec.completions;
      else if (o.kind === 'JobSet') replicas = o.spec.replicatedJobs[0].template.spec.completions;
      // The pod's index among the trainer's node pods: PyTorchJob's Master is node 0 and its
      // Workers 1..; Job and JobSet pods are their completion index.
      let firstNode = 0;
      if (o.kind === 'PyTorchJob') {
        // What the training operator (v1.8) injects: with nprocPerNode "1" (one launcher per
        // pod) WORLD_SIZE is the node count and RANK the node rank, as are PET_NNODES and
        // PET_NODE_RANK.
        for (const n of ['MASTER_ADDR', 'MASTER_PORT', 'WORLD_SIZE', 'RANK', 'PET_MASTER_ADDR', 'PET_MASTER_PORT',
                         'PET_NNODES', 'PET_NODE_RANK', 'PET_NPROC_PER_NODE']) {
          p.injected.push({ name: n, by: 'PyTorchJob operator' });
        }
        if (where.split('/')[3] === 'Worker') firstNode = 1;
      }
      plan.roles.push({ name: component, kind: o.kind, replica_group: where, replicas, first_node: firstNode, ...p,
                        grace_seconds: spec.terminationGracePeriodSeconds });
    }
  }
  process.stdout.write(JSON.stringify(plan, null, 2) + '\n');
}

main();
