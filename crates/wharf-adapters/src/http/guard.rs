//! The private-address guard: which IP addresses the network sender may connect to.
//!
//! Owns: the list of non-public address ranges (IPv4 and IPv6, with IPv4 embedded in IPv6
//! judged as IPv4), CIDR parsing, and the operator's allow-list. Must not know: DNS, sockets,
//! URLs or HTTP. The resolver in `sender` asks this module about every address it is about to
//! hand to the connector, so the guard sees exactly the addresses that get connected to.
//!
//! Why a guard at all: a webhook URL comes from an application's payload, and without a guard
//! an outbox worker becomes a request forger against the worker's own network (cloud metadata
//! at 169.254.169.254, the database, an admin port on loopback).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP network in CIDR notation (`10.0.0.0/8`, `fd00::/8`), or one address (`/32`, `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix_len: u8,
}

/// A string that is not an address or a CIDR network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IP address or a CIDR network such as 10.0.0.0/8 or fd00::/8")]
pub struct CidrParseError(pub String);

impl Cidr {
    /// The network `addr/prefix_len`; host bits of `addr` are cleared. `None` if the prefix is
    /// longer than the address.
    pub fn new(addr: IpAddr, prefix_len: u8) -> Option<Cidr> {
        let bits = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if prefix_len > bits {
            return None;
        }
        let network = match addr {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(prefix_len))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(prefix_len))),
        };
        Some(Cidr {
            network,
            prefix_len,
        })
    }

    /// Whether `addr` is inside this network. An IPv4 network never contains an IPv6 address
    /// and vice versa; callers unwrap IPv4-mapped IPv6 first (see [`AddressGuard::check`]).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.network, addr) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                u32::from(a) & mask32(self.prefix_len) == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                u128::from(a) & mask128(self.prefix_len) == u128::from(net)
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrParseError;

    fn from_str(s: &str) -> Result<Cidr, CidrParseError> {
        let err = || CidrParseError(s.to_owned());
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| err())?;
        let prefix_len = match prefix {
            // Only plain decimal: "+8" or " 8" parse as u8 but are not CIDR notation.
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse().map_err(|_| err())?
            }
            Some(_) => return Err(err()),
            None => match addr {
                IpAddr::V4(_) => 32,
                IpAddr::V6(_) => 128,
            },
        };
        Cidr::new(addr, prefix_len).ok_or_else(err)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

fn mask32(prefix_len: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix_len))
        .unwrap_or(0)
}

fn mask128(prefix_len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix_len))
        .unwrap_or(0)
}

/// Why an address is not public. The names are stable diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressClass {
    /// `0.0.0.0/8`, `::/128`.
    Unspecified,
    /// `127.0.0.0/8`, `::1/128`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`).
    Private,
    /// RFC 6598 carrier-grade NAT, `100.64.0.0/10`.
    SharedCgnat,
    /// `169.254.0.0/16` (cloud metadata lives here), `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`, and the deprecated site-local `fec0::/10`.
    UniqueLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// Benchmarking, protocol assignments, reserved and broadcast space, discard-only,
    /// transition prefixes that hide an IPv4 address (6to4, Teredo, NAT64 local use), and
    /// IPv4-compatible IPv6: nothing a webhook receiver should live on.
    Reserved,
}

impl AddressClass {
    /// The stable name, as used in logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            AddressClass::Unspecified => "unspecified",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::SharedCgnat => "cgnat",
            AddressClass::LinkLocal => "link_local",
            AddressClass::UniqueLocal => "unique_local",
            AddressClass::Multicast => "multicast",
            AddressClass::Documentation => "documentation",
            AddressClass::Reserved => "reserved",
        }
    }
}

/// IPv4 ranges that are not globally reachable (IANA special-purpose registry), checked in
/// order; the first match names the class.
const FORBIDDEN_V4: &[([u8; 4], u8, AddressClass)] = &[
    ([0, 0, 0, 0], 8, AddressClass::Unspecified),
    ([127, 0, 0, 0], 8, AddressClass::Loopback),
    ([10, 0, 0, 0], 8, AddressClass::Private),
    ([172, 16, 0, 0], 12, AddressClass::Private),
    ([192, 168, 0, 0], 16, AddressClass::Private),
    ([100, 64, 0, 0], 10, AddressClass::SharedCgnat),
    ([169, 254, 0, 0], 16, AddressClass::LinkLocal),
    ([224, 0, 0, 0], 4, AddressClass::Multicast),
    ([192, 0, 2, 0], 24, AddressClass::Documentation),
    ([198, 51, 100, 0], 24, AddressClass::Documentation),
    ([203, 0, 113, 0], 24, AddressClass::Documentation),
    ([192, 0, 0, 0], 24, AddressClass::Reserved),
    ([192, 88, 99, 0], 24, AddressClass::Reserved),
    ([198, 18, 0, 0], 15, AddressClass::Reserved),
    // 240/4 is reserved and includes the limited broadcast 255.255.255.255.
    ([240, 0, 0, 0], 4, AddressClass::Reserved),
];

/// IPv6 ranges that are not globally reachable. IPv4-mapped addresses (`::ffff:0:0/96`) never
/// get here: they are judged as the IPv4 address they carry.
const FORBIDDEN_V6: &[(u128, u8, AddressClass)] = &[
    (0, 128, AddressClass::Unspecified),
    (1, 128, AddressClass::Loopback),
    // IPv4-compatible (deprecated): `::a.b.c.d` would otherwise smuggle any IPv4 address.
    (0, 96, AddressClass::Reserved),
    (0xfe80 << 112, 10, AddressClass::LinkLocal),
    (0xfc00 << 112, 7, AddressClass::UniqueLocal),
    (0xfec0 << 112, 10, AddressClass::UniqueLocal),
    (0xff00 << 112, 8, AddressClass::Multicast),
    (0x2001_0db8 << 96, 32, AddressClass::Documentation),
    (0x3fff << 112, 20, AddressClass::Documentation),
    // NAT64 local use (RFC 8215); the well-known 64:ff9b::/96 is judged by its IPv4 below.
    (0x0064_ff9b_0001 << 80, 48, AddressClass::Reserved),
    (0x0100 << 112, 64, AddressClass::Reserved),
    // IETF protocol assignments, including Teredo (2001::/32), which embeds an IPv4 address.
    (0x2001 << 112, 23, AddressClass::Reserved),
    // 6to4, which embeds an IPv4 address; deprecated (RFC 7526).
    (0x2002 << 112, 16, AddressClass::Reserved),
    // SRv6 segment identifiers (RFC 9602).
    (0x5f00 << 112, 16, AddressClass::Reserved),
];

/// The well-known NAT64 prefix `64:ff9b::/96` (RFC 6052): the low 32 bits are an IPv4 address.
const NAT64_WELL_KNOWN: u128 = 0x0064_ff9b << 96;

/// The class of `addr` if it is not a public unicast address, else `None`.
///
/// IPv4-mapped (`::ffff:a.b.c.d`) and well-known NAT64 (`64:ff9b::a.b.c.d`) addresses are judged
/// as the IPv4 address inside them, so `::ffff:127.0.0.1` is loopback.
pub fn classify_address(addr: IpAddr) -> Option<AddressClass> {
    match canonical(addr) {
        IpAddr::V4(v4) => FORBIDDEN_V4
            .iter()
            .find(|(net, len, _)| {
                Cidr::new(IpAddr::V4((*net).into()), *len)
                    .is_some_and(|c| c.contains(IpAddr::V4(v4)))
            })
            .map(|(_, _, class)| *class),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            FORBIDDEN_V6
                .iter()
                .find(|(net, len, _)| bits & mask128(*len) == *net)
                .map(|(_, _, class)| *class)
        }
    }
}

/// `addr` with any IPv4 address hidden in IPv6 (mapped, well-known NAT64) brought out.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let bits = u128::from(v6);
            if bits & mask128(96) == NAT64_WELL_KNOWN {
                // The low 32 bits are the IPv4 address; truncation is the point.
                return IpAddr::V4(Ipv4Addr::from(bits as u32));
            }
            addr
        }
        IpAddr::V4(_) => addr,
    }
}

/// An address the guard refused, with why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "destination address {addr} is {} and not in the allow-list: non-public addresses are refused \
     unless `[http] allow_cidrs` lists their network (e.g. allow_cidrs = [\"{addr}/32\"])",
    class.as_str()
)]
pub struct Forbidden {
    /// The refused address.
    pub addr: IpAddr,
    /// Why it is not public.
    pub class: AddressClass,
}

/// The guard: refuses every non-public address unless the operator allowed its network.
#[derive(Debug, Clone, Default)]
pub struct AddressGuard {
    allow: Vec<Cidr>,
}

impl AddressGuard {
    /// A guard that additionally admits the networks in `allow` (for example `127.0.0.0/8` in
    /// tests, or an internal receiver's `10.1.2.0/24`).
    pub fn new(allow: Vec<Cidr>) -> AddressGuard {
        AddressGuard { allow }
    }

    /// `Ok` when the sender may connect to `addr`.
    ///
    /// The allow-list is consulted first, on the address as written and on the IPv4 address
    /// it may carry, so allowing `127.0.0.0/8` also allows `::ffff:127.0.0.1`.
    pub fn check(&self, addr: IpAddr) -> Result<(), Forbidden> {
        let inner = canonical(addr);
        if self
            .allow
            .iter()
            .any(|net| net.contains(addr) || net.contains(inner))
        {
            return Ok(());
        }
        match classify_address(addr) {
            None => Ok(()),
            Some(class) => Err(Forbidden { addr, class }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(addr: &str, expected: Option<&str>) {
        let ip: IpAddr = addr.parse().unwrap();
        assert_eq!(
            classify_address(ip).map(AddressClass::as_str),
            expected,
            "{addr}"
        );
    }

    #[test]
    fn address_classes() {
        check("0.0.0.0", Some("unspecified"));
        check("127.0.0.1", Some("loopback"));
        check("127.255.255.254", Some("loopback"));
        check("10.1.2.3", Some("private"));
        check("172.16.0.1", Some("private"));
        check("172.31.255.255", Some("private"));
        check("172.32.0.1", None);
        check("192.168.1.1", Some("private"));
        check("100.64.0.1", Some("cgnat"));
        check("100.127.255.255", Some("cgnat"));
        check("100.128.0.1", None);
        check("169.254.169.254", Some("link_local"));
        check("224.0.0.1", Some("multicast"));
        check("239.255.255.250", Some("multicast"));
        check("192.0.2.10", Some("documentation"));
        check("198.51.100.7", Some("documentation"));
        check("203.0.113.9", Some("documentation"));
        check("198.18.0.1", Some("reserved"));
        check("255.255.255.255", Some("reserved"));
        check("192.0.0.8", Some("reserved"));
        check("8.8.8.8", None);
        check("1.1.1.1", None);
        check("93.184.216.34", None);
        check("::", Some("unspecified"));
        check("::1", Some("loopback"));
        check("::ffff:127.0.0.1", Some("loopback"));
        check("::ffff:10.0.0.1", Some("private"));
        check("::ffff:169.254.169.254", Some("link_local"));
        check("::ffff:8.8.8.8", None);
        check("::127.0.0.1", Some("reserved"));
        check("64:ff9b::10.0.0.1", Some("private"));
        check("64:ff9b::8.8.8.8", None);
        check("64:ff9b:1::1", Some("reserved"));
        check("fe80::1", Some("link_local"));
        check("febf::1", Some("link_local"));
        check("fc00::1", Some("unique_local"));
        check("fd12:3456::1", Some("unique_local"));
        check("fec0::1", Some("unique_local"));
        check("ff02::1", Some("multicast"));
        check("2001:db8::1", Some("documentation"));
        check("3fff::1", Some("documentation"));
        check("2001::1", Some("reserved"));
        check("2002:7f00:1::1", Some("reserved"));
        check("100::1", Some("reserved"));
        check("2606:4700:4700::1111", None);
        check("2a00:1450:4001::200e", None);
    }

    #[test]
    fn cidr_parsing() {
        let ok = |s: &str, shown: &str| assert_eq!(s.parse::<Cidr>().unwrap().to_string(), shown);
        ok("127.0.0.0/8", "127.0.0.0/8");
        ok("127.1.2.3/8", "127.0.0.0/8");
        ok("10.0.0.1", "10.0.0.1/32");
        ok("::1", "::1/128");
        ok("fd00::/8", "fd00::/8");
        ok("0.0.0.0/0", "0.0.0.0/0");
        for bad in [
            "",
            "127.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10/8",
            "10.0.0.0/+8",
            "x",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn allow_list_admits_its_networks_only() {
        let guard = AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(guard.check(ip("127.0.0.1")).is_ok());
        assert!(guard.check(ip("::ffff:127.0.0.1")).is_ok());
        assert!(guard.check(ip("8.8.8.8")).is_ok());
        let refused = guard.check(ip("10.0.0.1")).unwrap_err();
        assert_eq!(refused.class, AddressClass::Private);
        assert!(guard.check(ip("::1")).is_err());
        assert!(AddressGuard::default().check(ip("127.0.0.1")).is_err());
        let everything = AddressGuard::new(vec!["0.0.0.0/0".parse().unwrap()]);
        assert!(everything.check(ip("10.0.0.1")).is_ok());
    }
}
