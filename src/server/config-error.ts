/**
 * The error of a bad server setting (an environment variable, named in the message): its own module so a
 * command can catch it without loading the whole configuration.
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`${variable}: ${detail}`);
    this.name = 'ConfigError';
  }
}
