/**
 * The forms of the values Docker sends, checked where a body enters (wire.ts, the routes):
 * Docker's 64-hex IDs, ovsnet's PoolIDs, addresses, MACs. A refusal is REQUEST_INVALID naming
 * the method, the field and the valid form, and quotes at most SHOWN characters of the value: a
 * request may carry a megabyte, an error never echoes it.
 */
import { CidrError, parseAddress, parseCidr } from '../lib/cidr.js';
import { OvsnetError } from '../lib/errors.js';
import { isPoolId } from '../ipam-driver/pools/pool-id.js';

export type Body = Record<string, unknown>;

/** At most this many characters of a value a request sent are quoted back. */
const SHOWN = 80;

/** A bounded rendering of a value for an error message. */
export function shown(v: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(v) ?? String(v);
  } catch {
    text = `a ${typeof v} nested too deep to show`; // JSON.stringify recurses: a deep value overflows
  }
  return text.length > SHOWN ? `${text.slice(0, SHOWN)}... (${text.length} characters)` : text;
}

export function invalid(method: string, message: string): OvsnetError {
  return new OvsnetError('REQUEST_INVALID', `${method}: ${message}`);
}

/** Docker's network and endpoint IDs: 64 lowercase hex digits (moby's stringid). */
const DOCKER_ID = /^[0-9a-f]{64}$/;
/** A swarm network's ID as well: swarmkit's identity.NewID, 25 base-36 characters. */
const NETWORK_ID = /^(?:[0-9a-f]{64}|[0-9a-z]{25})$/;

/**
 * A NetworkID or EndpointID. Interface names, OVS external_ids, iptables comments and store
 * keys are made from these: anything but Docker's form (`+`, NUL, `/`, 200 KB) is refused here,
 * before any of them is touched.
 */
export function dockerId(method: string, b: Body, field: string): string {
  const v = b[field];
  const form = field === 'NetworkID' ? NETWORK_ID : DOCKER_ID;
  if (typeof v !== 'string' || !form.test(v)) {
    const what = v === undefined || v === null ? 'is missing' : `is ${shown(v)}`;
    const expected = field === 'NetworkID' ? ' (or a swarm network ID: 25 lowercase letters and digits)' : '';
    throw invalid(method, `${field} ${what}; expected a Docker ID: 64 lowercase hexadecimal characters${expected}`);
  }
  return v;
}

/** A PoolID as ovsnet's RequestPool answers it: "LocalDefault/10.1.0.0/24[/10.1.0.128/25]". */
export function poolId(method: string, b: Body): string {
  const v = b.PoolID;
  if (typeof v !== 'string' || !isPoolId(v)) {
    const what = v === undefined || v === null ? 'is missing' : `is ${shown(v)}`;
    throw invalid(
      method,
      `PoolID ${what}; expected a PoolID ovsnet's RequestPool gave: ADDRESS_SPACE/SUBNET[/RANGE], e.g. LocalDefault/10.1.0.0/24`,
    );
  }
  return v;
}

/** How an address must be written: plain ("10.1.0.5"), or with its prefix length ("10.1.0.5/24"). */
export type AddressForm = 'plain or CIDR' | 'CIDR';

const EXAMPLE: Record<AddressForm, string> = {
  'plain or CIDR': 'an IPv4 or IPv6 address such as 10.1.0.5 or fd00::5',
  CIDR: 'an address with its prefix length such as 10.1.0.5/24 or fd00::5/64',
};

/** `text` (found at `field`) is an address of `form`; "" when `optional`. */
export function checkAddress(method: string, field: string, text: string, form: AddressForm, optional: boolean): string {
  if (text === '' && optional) return text;
  try {
    if (form === 'CIDR' || text.includes('/')) parseCidr(text);
    else parseAddress(text);
    if (text.trim() !== text) throw new CidrError('spaces around');
  } catch (err) {
    if (!(err instanceof CidrError)) throw err;
    throw invalid(method, `${field} is ${shown(text)}; expected ${EXAMPLE[form]}${optional ? ' (or "")' : ''}`);
  }
  return text;
}

/** A MAC address as Docker writes it ("02:42:ac:11:00:02"), or "". */
export function checkMac(method: string, field: string, text: string): string {
  if (text !== '' && !/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/.test(text)) {
    throw invalid(method, `${field} is ${shown(text)}; expected a MAC address such as 02:42:0a:01:00:05 (or "")`);
  }
  // A group bit (first octet odd: broadcast, multicast) or all zeros is refused by the kernel
  // only at Join, after the endpoint exists: refused here, before anything is made.
  if (text !== '' && ((parseInt(text.slice(0, 2), 16) & 1) === 1 || /^(00:){5}00$/.test(text))) {
    throw invalid(
      method,
      `${field} is ${shown(text)}; expected a unicast MAC address (the first octet even, not all zeros) such as 02:42:0a:01:00:05 (or "")`,
    );
  }
  return text;
}

/**
 * An interface name as Linux takes one (the kernel's dev_valid_name): 1 to 15 bytes, not "." or
 * "..", no "/", ":" or whitespace; ovsnet also refuses control and non-ASCII characters.
 */
export function checkIfname(method: string, field: string, v: unknown): string {
  if (typeof v !== 'string' || !/^[\x21-\x7e]{1,15}$/.test(v) || /[/:]/.test(v) || v === '.' || v === '..') {
    throw invalid(
      method,
      `${field} is ${shown(v)}; expected an interface name: 1 to 15 printable ASCII characters without "/", ":" or spaces, not "." or "..", such as eth1 or data0`,
    );
  }
  return v;
}
