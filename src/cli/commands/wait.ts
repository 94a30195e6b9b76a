// `pilot-agent wait`: block until the local proxy reports ready (a preStop / postStart helper).
import { Option, type Command } from 'commander';
import { scope } from '../../log/logger.js';
import { DEFAULT_READY_URL, parseReadyUrl } from '../../status/ready-url.js';
import { nonNegativeIntValue } from '../flag-values.js';

interface WaitFlags {
  periodMillis: number;
  requestTimeoutMillis: number;
  timeoutSeconds: number;
  url: string;
}

export function registerWait(program: Command): void {
  const command = program.command('wait').description('Waits until the proxy is ready');
  command
    .addOption(new Option('--periodMillis <ms>', 'number of milliseconds to wait between attempts')
      .default(500).argParser(nonNegativeIntValue))
    .addOption(new Option('--requestTimeoutMillis <ms>', 'number of milliseconds to wait for response')
      .default(500).argParser(nonNegativeIntValue))
    .addOption(new Option('--timeoutSeconds <s>', 'maximum number of seconds to wait for the proxy to be ready')
      .default(60).argParser(nonNegativeIntValue))
    .addOption(new Option('--url <url>',
      'URL to use in requests; an empty host means the local agent, which may answer HTTPS or plain HTTP')
      .default(DEFAULT_READY_URL));
  command.action(async (flags: WaitFlags) => {
    const target = parseReadyUrl(flags.url);
    const log = scope('default');
    log.info(`Waiting for the proxy to be ready (timeout: ${flags.timeoutSeconds} seconds)...`);
    const { waitForReady } = await import('../../status/wait.js'); // loaded by this command only
    await waitForReady({
      target,
      periodMs: flags.periodMillis,
      requestTimeoutMs: Math.max(1, flags.requestTimeoutMillis),
      timeoutMs: flags.timeoutSeconds * 1000,
      onAttempt: (error) => log.debug(`Proxy not ready yet: ${error}`),
    });
    log.info('The proxy is ready!');
  });
}
