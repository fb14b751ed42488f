/**
 * Every OVSNET_* setting: its default, its valid form and what it does. The one source of
 * docs/settings.md's table and plugin/config.json's env (test/config/config.test.ts checks all
 * three agree); config.ts validates them.
 */
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Name, default and valid form of each setting: the source of docs/settings.md's table. */
export const SETTINGS = {
  OVSNET_STORE: {
    default: 'sqlite:/var/lib/ovsnet/state.db',
    form: 'sqlite:/absolute/path.db or etcd://host:port[,host:port...]',
    doc: 'State store: the embedded SQLite file (single host) or etcd endpoints (hosts sharing networks).',
  },
  OVSNET_STATE_DIR_SHARED: {
    default: 'false',
    form: 'true or false',
    doc: "The embedded store's directory may be writable by other users (a sticky one such as /tmp); otherwise ovsnet refuses to start there, since they could plant links its files would follow.",
  },
  OVSNET_STORE_TIMEOUT_MS: {
    default: '3000',
    form: 'an integer from 100 to 10000',
    doc: 'Bound on every store call; a slower store fails the call as unavailable (Docker gives up after ~15 s).',
  },
  OVSNET_ETCD_CA: { default: '', form: 'path to a PEM file', doc: 'CA bundle: connect to etcd over TLS.' },
  OVSNET_ETCD_CERT: { default: '', form: 'path to a PEM file (with OVSNET_ETCD_KEY)', doc: 'Client certificate for etcd TLS.' },
  OVSNET_ETCD_KEY: { default: '', form: 'path to a PEM file (with OVSNET_ETCD_CERT)', doc: 'Client key for etcd TLS.' },
  OVSNET_ETCD_USERNAME: { default: '', form: 'an etcd user name (with OVSNET_ETCD_PASSWORD)', doc: 'etcd authentication user.' },
  OVSNET_ETCD_PASSWORD: {
    default: '',
    form: 'the password of OVSNET_ETCD_USERNAME (not with OVSNET_ETCD_PASSWORD_FILE)',
    doc: 'etcd authentication password. Shown by `docker plugin inspect`: prefer OVSNET_ETCD_PASSWORD_FILE.',
  },
  OVSNET_ETCD_PASSWORD_FILE: {
    default: '',
    form: 'absolute path to a file holding the password on one line (not with OVSNET_ETCD_PASSWORD)',
    doc: 'etcd authentication password, read from this file at start, so that it is in no environment (managed plugin: a file under /etc/ovsnet, the read-only secrets mount).',
  },
  OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS: {
    default: 'false',
    form: 'true or false',
    doc: 'With a user and password but no OVSNET_ETCD_CA the password would cross the network in clear text, so ovsnet refuses to start; true accepts that risk (an etcd on a trusted link only).',
  },
  OVSNET_LOG_LEVEL: { default: 'info', form: LOG_LEVELS.join('|'), doc: 'Log level of the JSON logs on stdout.' },
  OVSNET_SOCKET: {
    default: '/run/docker/plugins/ovsnet.sock',
    form: 'an absolute path ending in .sock',
    doc: 'Plugin socket Docker finds the plugin by (the driver name is the file name without .sock).',
  },
  OVSNET_CNI_SOCKET: {
    default: '',
    form: 'an absolute path, or off (default: beside OVSNET_SOCKET, named NAME.cni)',
    doc: 'Socket the CNI plugin (/opt/cni/bin/ovsnet) sends its commands to; off: no CNI front end.',
  },
  OVSNET_DEFAULT_POOLS: {
    default: '10.192.0.0/10:24,fd5e:0e00::/40:64',
    form: "comma-separated RANGE:LENGTH, e.g. 10.192.0.0/10:24,fd5e:e00::/40:64 (at least one IPv4 range; LENGTH at least the range's own)",
    doc: 'Ranges that networks created without --subnet get their pool from, and the pool size carved from each.',
  },
  OVSNET_MIN_PREFIX: {
    default: '8,32',
    form: 'IPV4,IPV6 prefix lengths, IPv4 1-30 and IPv6 1-124, e.g. 8,32',
    doc: 'The largest subnets (shortest prefixes) networks and pools may have; OVSNET_DEFAULT_POOLS must keep to them too.',
  },
  OVSNET_BRIDGE: {
    default: 'ovsnet0',
    form: 'an interface name of 1-15 letters, digits, "-", "_" or "."',
    doc: 'The Open vSwitch integration bridge every network is a VLAN segment of (created if missing).',
  },
  OVSNET_DATAPATH: {
    default: 'auto',
    form: 'auto|system|netdev',
    doc: 'OVS datapath of the bridge: system (kernel module), netdev (userspace), auto = system when the openvswitch module is loaded.',
  },
  OVSNET_OVSDB: {
    default: 'unix:/var/run/openvswitch/db.sock',
    form: 'unix:/absolute/path or tcp:host:port',
    doc: 'Where ovsdb-server listens; ovsnet speaks OVSDB JSON-RPC to it (no ovs-vsctl).',
  },
  OVSNET_HOST: {
    default: '',
    form: 'a host name of 1-63 letters, digits, "-", "_" or "." (default: the hostname)',
    doc: 'Name of this host in the host registry (hosts sharing a store must differ).',
  },
  OVSNET_VTEP_IP: {
    default: '',
    form: 'an IPv4 address of this host (default: the address of the interface holding the default route)',
    doc: 'Tunnel endpoint address other hosts reach this one at.',
  },
  OVSNET_UPLINK: {
    default: '',
    form: 'an interface name of 1-15 characters (none when empty)',
    doc: 'Interface trunking VLAN networks (-o ovsnet.encap=vlan -o ovsnet.network=NAME) onto the physical network; its addresses move to the host port ovsnet-host.',
  },
  OVSNET_HOST_TTL: {
    default: '10',
    form: 'seconds, an integer from 2 to 300',
    doc: 'Lease of the host registration: a host that stops is gone from its peers within this time (up to ~0.6 s more: etcd looks for expired leases every 500 ms).',
  },
  OVSNET_RECLAIM_GRACE: {
    default: '600',
    form: 'seconds, an integer from 0 to 86400',
    doc: "How long a dead host's address blocks and reservations in logical networks are kept (its containers may still run) before peers reclaim them.",
  },
  OVSNET_REAP_GRACE: {
    default: '60',
    form: 'seconds, an integer from 1 to 86400',
    doc: 'How long a reservation whose holder is gone (its endpoint or CNI container vanished, or no CreateEndpoint bound it) is kept before it is released.',
  },
  OVSNET_SPARE_VETHS: {
    default: '16',
    form: 'an integer from 0 to 256',
    doc: "How many released veth pairs are kept to be renamed for the next containers instead of deleted (a deletion holds the kernel's link lock ~20 ms, which a Join right behind it waits for); 0 deletes each one.",
  },
  OVSNET_JOURNAL: {
    default: '/var/lib/ovsnet/unconfirmed.json',
    form: 'an absolute file path, or off (kept in memory only)',
    doc: 'Where IPAM changes the store did not confirm (a timeout: applied or not?) are kept until settled, so that a restart during a store outage leaks no address.',
  },
  OVSNET_SCOPE: {
    default: 'local',
    form: 'local or global (global needs OVSNET_STORE=etcd://...)',
    doc: 'local: networks of one Docker host (standalone Docker); global: Docker swarm networks (`docker network create --scope swarm`), created once for the whole swarm.',
  },
  OVSNET_VXLAN_PORT: {
    default: '4789',
    form: 'a UDP port, an integer from 1 to 65535 (the same on every host)',
    doc: "UDP port of ovsnet's VXLAN tunnels; another one keeps them apart from the kernel VXLAN of Docker's overlay and ingress networks, which use 4789 too.",
  },
  OVSNET_DOCKER_HOST: {
    default: 'unix:///var/run/docker.sock',
    form: 'unix:///absolute/path (no "..", at most 4096 characters), or off',
    doc: "Docker Engine socket ovsnet reads (GET only) for swarm services' VIPs and their tasks on its swarm networks; off: not followed (swarm VIPs then do not work on ovsnet networks, dnsrr services do).",
  },
  OVSNET_NICE: {
    default: 'inherit',
    form: 'an integer from -20 to 19, or inherit',
    doc: "Scheduling priority of ovsnet's threads, and of its session's autogroup when it leads its session (Open vSwitch's daemons run at -10). inherit: left as started. A lower value takes CAP_SYS_NICE (without it: a warning, and the priority it was started with). In a CPU cgroup of its own the cgroup's weight decides instead (docs/operators-guide.md).",
  },
  OVSNET_METRICS_ADDR: {
    default: '',
    form: 'PORT (on 127.0.0.1) or HOST:PORT, e.g. 9477 or 127.0.0.1:9477',
    doc: 'Serve Prometheus metrics on GET /metrics there; off when empty.',
  },
} as const;

export type SettingName = keyof typeof SETTINGS;
