#!/usr/bin/env node
// Validates what `moerl deploy render` wrote, offline and strictly (unknown fields rejected):
//   node validate.js --instance-types TYPES.json DIR [DIR ...]
// TYPES.json is `moerl deploy instance-types --json`. Each DIR holds eksctl-cluster.yaml,
// iam-policy.json and k8s/*.yaml. Prints one line per problem; exits 1 if there is any.
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const { makeAjv, KINDS } = require('./lib/schemas');
const { semanticChecks } = require('./lib/checks');

function usage(msg) {
  process.stderr.write(`validate: ${msg}\nusage: node validate.js --instance-types TYPES.json DIR [DIR ...]\n`);
  process.exit(2);
}

function formatErrors(errors) {
  // Report the most specific problems: unknown fields first, without oneOf-null noise.
  const out = [];
  for (const e of errors || []) {
    if (e.keyword === 'oneOf' || (e.keyword === 'type' && e.params.type === 'null')) continue;
    if (e.keyword === 'additionalProperties') {
      out.push(`${e.instancePath || '/'}: unknown field "${e.params.additionalProperty}"`);
    } else {
      out.push(`${e.instancePath || '/'}: ${e.message}${e.params && e.params.allowedValues ? ' ' + JSON.stringify(e.params.allowedValues) : ''}`);
    }
  }
  return [...new Set(out)];
}

function loadDocs(file) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'), { prettyErrors: true });
  const out = [];
  docs.forEach((d, i) => {
    if (d.errors.length) throw new Error(`${file}: document ${i}: YAML error: ${d.errors[0].message}`);
    const obj = d.toJS();
    if (obj !== null) out.push({ index: i, obj });
  });
  return out;
}

function validateDir(ajv, dir, instanceTypes) {
  const problems = [];
  let count = 0;
  const check = (file, index, obj) => {
    const key = `${obj.apiVersion}/${obj.kind}`;
    const id = KINDS[key];
    if (!id) { problems.push(`${file}: document ${index}: no schema for ${key}`); return; }
    const v = ajv.getSchema(id);
    if (!v(obj)) for (const m of formatErrors(v.errors)) problems.push(`${file}: document ${index} (${obj.kind}/${obj.metadata && obj.metadata.name}): ${m}`);
    count++;
  };
  const clusterFile = path.join(dir, 'eksctl-cluster.yaml');
  const [cluster] = loadDocs(clusterFile);
  check('eksctl-cluster.yaml', 0, cluster.obj);
  const policy = JSON.parse(fs.readFileSync(path.join(dir, 'iam-policy.json'), 'utf8'));
  const pv = ajv.getSchema('moerl.aws.iam.PolicyDocument');
  if (!pv(policy)) for (const m of formatErrors(pv.errors)) problems.push(`iam-policy.json: ${m}`);
  count++;
  const objects = [];
  const k8s = path.join(dir, 'k8s');
  for (const f of fs.readdirSync(k8s).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const { index, obj } of loadDocs(path.join(k8s, f))) {
      check(`k8s/${f}`, index, obj);
      objects.push({ file: `k8s/${f}`, index, obj });
    }
  }
  problems.push(...semanticChecks(objects, cluster.obj, instanceTypes));
  return { problems, count };
}

function main() {
  const args = process.argv.slice(2);
  let typesFile = null;
  const dirs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--instance-types') typesFile = args[++i];
    else dirs.push(args[i]);
  }
  if (!typesFile) usage('--instance-types is required');
  if (!dirs.length) usage('give at least one rendered directory');
  const instanceTypes = JSON.parse(fs.readFileSync(typesFile, 'utf8'));
  const ajv = makeAjv();
  let bad = 0;
  for (const dir of dirs) {
    let result;
    try {
      result = validateDir(ajv, dir, instanceTypes);
    } catch (e) {
      result = { problems: [e.message], count: 0 };
    }
    for (const p of result.problems) process.stdout.write(`${dir}: ${p}\n`);
    if (result.problems.length) bad++;
    else process.stdout.write(`${dir}: ${result.count} objects valid\n`);
  }
  process.exit(bad ? 1 : 0);
}

main();
