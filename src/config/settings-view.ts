/**
 * The effective settings, as the daemon runs with them: every OVSNET_* name with its value or
 * default, secrets redacted. Served read-only on the admin endpoint (plugin-api/admin-routes.ts)
 * so that the CLI reads the store the daemon reads (cli/locate.ts).
 */
import { SETTINGS, type SettingName } from './config.js';

/** Settings whose value is itself a secret (a path to a secret is not). */
export const SECRET_SETTINGS: readonly SettingName[] = ['OVSNET_ETCD_PASSWORD'];

/** What a secret that is set reads as; an unset one stays ''. */
export const REDACTED = '(set, redacted)';

export type Settings = Readonly<Record<SettingName, string>>;

export function effectiveSettings(env: Readonly<Record<string, string | undefined>>): Settings {
  const out = {} as Record<SettingName, string>;
  for (const name of Object.keys(SETTINGS) as SettingName[]) {
    const given = env[name]?.trim() ?? '';
    const value = given === '' ? SETTINGS[name].default : given;
    out[name] = SECRET_SETTINGS.includes(name) && value !== '' ? REDACTED : value;
  }
  return out;
}
