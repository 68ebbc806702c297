// Builds one Ajv instance holding strict JSON schemas for everything `moerl deploy render`
// writes:
//  - Kubernetes core kinds: the OpenAPI-derived JSON schemas that the npm package
//    kubernetes-models@4.3.1 ships in its _schemas/*.js files (Kubernetes 1.27 API). Each
//    file registers its schema through @kubernetes-models/validate's register(); we hand
//    them a collecting register() instead, then make every object schema strict
//    (additionalProperties: false wherever the schema lists properties).
//  - PyTorchJob, JobSet, eksctl ClusterConfig, IAM policy: small strict schemas written from
//    the projects' documented API types (see schemas/*.json, each cites its source). Their
//    pod templates $ref the core PodTemplateSpec / JobTemplateSpec schemas above.
'use strict';

const fs = require('fs');
const path = require('path');
const Ajv = require('ajv');

const MODELS = path.dirname(require.resolve('kubernetes-models/package.json'));
const APIMACHINERY = path.dirname(require.resolve('@kubernetes-models/apimachinery/package.json', { paths: [MODELS] }));

// Collects the raw schemas by standing in for @kubernetes-models/validate in require's cache.
function collectCoreSchemas() {
  const collected = {};
  const fake = {
    register(id, schema) { collected[id] = schema; },
    validate() { throw new Error('not used'); },
  };
  for (const from of [MODELS, APIMACHINERY]) {
    const resolved = require.resolve('@kubernetes-models/validate', { paths: [from] });
    require.cache[resolved] = { id: resolved, filename: resolved, loaded: true, exports: fake };
  }
  for (const dir of [path.join(APIMACHINERY, '_schemas'), path.join(MODELS, '_schemas')]) {
    for (const f of fs.readdirSync(dir)) {
      if (!f.endsWith('.js')) continue;
      const mod = require(path.join(dir, f));
      if (typeof mod.addSchema === 'function') mod.addSchema();
    }
  }
  if (Object.keys(collected).length < 500 || !collected['io.k8s.api.core.v1.PodSpec']) {
    throw new Error(`kubernetes-models: expected the raw OpenAPI schemas, found ${Object.keys(collected).length}; ` +
                    'is kubernetes-models@4.3.1 installed (npm ci in tools/k8s-schemas)?');
  }
  return collected;
}

// Deep copy with additionalProperties: false on every schema that enumerates properties.
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (!schema || typeof schema !== 'object') return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'properties') {
      out.properties = {};
      for (const [p, s] of Object.entries(v)) out.properties[p] = strict(s);
    } else if (k === 'enum' || k === 'required') {
      out[k] = v;
    } else {
      out[k] = strict(v);
    }
  }
  if (out.properties && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

// Kubernetes quantity: sign, number, then a binary-SI, decimal-SI or exponent suffix.
const QUANTITY = /^[+-]?(\d+|\d+\.\d*|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/;

function makeAjv() {
  const ajv = new Ajv({ allErrors: true, strict: false, strictTypes: false });
  ajv.addFormat('int32', { type: 'number', validate: (x) => Number.isInteger(x) && x >= -(2 ** 31) && x < 2 ** 31 });
  ajv.addFormat('int64', { type: 'number', validate: (x) => Number.isInteger(x) });
  ajv.addFormat('double', { type: 'number', validate: () => true });
  ajv.addFormat('byte', /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/);
  ajv.addFormat('date-time', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i);
  ajv.addFormat('quantity', QUANTITY);
  const core = collectCoreSchemas();
  for (const [id, s] of Object.entries(core)) ajv.addSchema(strict(s), id);
  const own = path.join(__dirname, '..', 'schemas');
  for (const f of fs.readdirSync(own).sort()) {
    if (!f.endsWith('.json')) continue;
    const s = JSON.parse(fs.readFileSync(path.join(own, f), 'utf8'));
    const id = s.$id;
    delete s.$id;
    delete s.$comment;
    ajv.addSchema(s, id);
  }
  return ajv;
}

// apiVersion/kind -> schema id.
const KINDS = {
  'v1/Namespace': 'io.k8s.api.core.v1.Namespace',
  'v1/ServiceAccount': 'io.k8s.api.core.v1.ServiceAccount',
  'v1/ConfigMap': 'io.k8s.api.core.v1.ConfigMap',
  'v1/Secret': 'io.k8s.api.core.v1.Secret',
  'v1/Service': 'io.k8s.api.core.v1.Service',
  'apps/v1/StatefulSet': 'io.k8s.api.apps.v1.StatefulSet',
  'apps/v1/Deployment': 'io.k8s.api.apps.v1.Deployment',
  'apps/v1/DaemonSet': 'io.k8s.api.apps.v1.DaemonSet',
  'batch/v1/Job': 'io.k8s.api.batch.v1.Job',
  'policy/v1/PodDisruptionBudget': 'io.k8s.api.policy.v1.PodDisruptionBudget',
  'networking.k8s.io/v1/NetworkPolicy': 'io.k8s.api.networking.v1.NetworkPolicy',
  'autoscaling/v2/HorizontalPodAutoscaler': 'io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler',
  'storage.k8s.io/v1/StorageClass': 'io.k8s.api.storage.v1.StorageClass',
  'kubeflow.org/v1/PyTorchJob': 'moerl.kubeflow.v1.PyTorchJob',
  'jobset.x-k8s.io/v1alpha2/JobSet': 'moerl.jobset.v1alpha2.JobSet',
  'eksctl.io/v1alpha5/ClusterConfig': 'moerl.eksctl.v1alpha5.ClusterConfig',
};

module.exports = { makeAjv, KINDS, strict, collectCoreSchemas };
