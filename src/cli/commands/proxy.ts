// `pilot-agent proxy [sidecar|router]` (spec 4.5): the agent and its data plane.
import { Argument, Option, type Command } from 'commander';
import { noEffectWarnings } from '../../config/env/registry.js';
import { AgentError } from '../../errors/agent-error.js';
import { complianceSummary } from '../../security/compliance.js';
import { scope } from '../../log/logger.js';
import {
  DEFAULT_SERVICE_CLUSTER, PROXY_LOG_LEVELS, PROXY_TYPES, parseProxyLogLevel, parseProxyType, type ProxyOptions,
} from '../../proxy/options.js';
import { addOptions, boolOption } from '../bool-flags.js';
import { completeWith } from '../completion/model.js';
import type { CliContext } from '../context.js';
import { nonNegativeIntValue, uint16Value } from '../flag-values.js';

interface ProxyFlags {
  concurrency: number;
  domain?: string;
  meshConfig: string;
  outlierLogPath?: string;
  profiling?: boolean;
  proxyComponentLogLevel?: string;
  proxyLogLevel: string;
  serviceCluster: string;
  stsPort: number;
  templateFile?: string;
  tokenManagerPlugin?: string;
}

export function registerProxy(program: Command, ctx: CliContext): void {
  const command = program.command('proxy')
    .description('XDS proxy agent: runs the data-plane proxy of a sidecar (default) or a gateway (router)')
    .addArgument(new Argument('[type]', 'sidecar, or router for an ingress gateway').choices(PROXY_TYPES))
    .addHelpText('after', `
Files read (relative to the working directory):
  ./etc/mesh/config/mesh    mesh configuration (--meshConfig; PROXY_CONFIG overrides proxy settings)
  ./etc/mesh/pod/labels     workload labels, downward-API form (key="value" lines)
  ./etc/mesh/resources      Gateway, VirtualService, ServiceEntry, RequestAuthentication and
                            AuthorizationPolicy files (*.yaml, *.yml, *.json; multi-document YAML), or the
                            directories the mesh config names in configSources (fs://DIR); watched, changes
                            apply within FILE_DEBOUNCE_DURATION; a resource that does not validate is logged
                            (file, resource, field) and the last good one stays in force
  ./etc/mesh/credentials/<credentialName>/tls.crt, tls.key
                            certificates of HTTPS Gateway servers (router)
Namespace: POD_NAMESPACE (default "default"); mesh-system is the root namespace.`);
  addOptions(command, [
    new Option('--concurrency <n>', 'Number of worker threads to run; 0 means MESH_CPU_LIMIT, else the number of cores')
      .default(0).argParser(nonNegativeIntValue),
    new Option('--domain <suffix>', 'DNS domain suffix. If not provided uses ${POD_NAMESPACE}.svc.cluster.local'),
    completeWith(new Option('--meshConfig <file>',
      'File name for mesh configuration. If not specified, a default mesh will be used. This may be overridden by '
      + 'PROXY_CONFIG environment variable or proxy.mesh.io/config annotation.').default('./etc/mesh/config/mesh'),
    { file: true }),
    completeWith(new Option('--outlierLogPath <path>', 'The log path for outlier detection'), { file: true }),
    ...boolOption('--profiling', 'Enable profiling via web interface host:port/debug/pprof/'),
    new Option('--proxyComponentLogLevel <levels>',
      'The component log level used to start the proxy (deprecated, use --proxyLogLevel instead)'),
    completeWith(new Option('--proxyLogLevel <levels>',
      `The log level used to start the proxy (choose from {${PROXY_LOG_LEVELS.filter((l) => l !== 'warn').join(', ')}}). `
      + 'Level may also include one or more scopes, such as \'info,misc:error,upstream:debug\'')
      .default('warning,misc:error'), { values: PROXY_LOG_LEVELS }),
    new Option('--serviceCluster <name>', 'Service cluster').default(DEFAULT_SERVICE_CLUSTER),
    new Option('--stsPort <port>', 'HTTP port used to serve the secure token service; 0 means no such service')
      .default(0).argParser(uint16Value),
    completeWith(new Option('--templateFile <file>', 'Go template bootstrap config'), { file: true }),
    new Option('--tokenManagerPlugin <name>', 'Token provider specific plugin name'),
  ]);
  command.action(async (type: string | undefined, flags: ProxyFlags) => {
    const env = ctx.env;
    if (env.problems.length > 0) {
      throw new AgentError('ERR_ENV_VALUE', `proxy: refusing to start: ${env.problems.length} environment `
        + `variable(s) with invalid values (${env.problems.map((p) => p.name).join(', ')}); see the messages above`);
    }
    const logLevels = parseProxyLogLevel('--proxyLogLevel', flags.proxyLogLevel);
    // Nothing accepted without a word: a variable set that this agent does not act on is named, with why.
    for (const warning of noEffectWarnings(env)) scope('default').warn(warning);
    const compliance = complianceSummary(env.values.COMPLIANCE_POLICY);
    if (compliance !== undefined) scope('default').info(compliance);
    if (flags.proxyComponentLogLevel !== undefined) {
      scope('default').warn('--proxyComponentLogLevel is deprecated; use --proxyLogLevel (for example info,misc:error)');
      const components = parseProxyLogLevel('--proxyComponentLogLevel', flags.proxyComponentLogLevel).components;
      for (const [name, level] of components) (logLevels.components as Map<string, typeof level>).set(name, level);
    }
    const options: ProxyOptions = Object.freeze({
      type: parseProxyType(type),
      concurrency: flags.concurrency,
      domain: flags.domain || `${env.values.POD_NAMESPACE}.svc.cluster.local`,
      meshConfigPath: flags.meshConfig,
      outlierLogPath: flags.outlierLogPath ?? '',
      profiling: flags.profiling === true,
      logLevels,
      serviceCluster: flags.serviceCluster,
      stsPort: flags.stsPort,
      templateFile: flags.templateFile ?? '',
      tokenManagerPlugin: flags.tokenManagerPlugin ?? '',
    });
    // Loaded here, not with the program: every other command (request, wait, version) starts
    // without the data plane, TLS and the mesh resources behind it.
    const { runProxy } = await import('../../agent/agent.js');
    await runProxy(options, env.values);
  });
}
