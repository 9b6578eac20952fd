//! `egress_allow`: the hosts, addresses and networks a guest may reach.
//!
//! Entries: `host`, `host:port`, `*.suffix`, `*.suffix:port`, an IP,
//! `ip:port`, `[v6]`, `[v6]:port`, a CIDR (`10.0.0.0/8`, `fd00::/8`). An
//! entry without a port allows the scheme's default port only (80 for
//! `http`, 443 for `https`). Names are compared in their canonical form (the
//! WHATWG URL parser's: lower case, IDNA, one trailing dot dropped), so an
//! entry and a URL spelling the same host differently still match, and a
//! numeric alias of an address (`2130706433`, `0x7f.1`) is that address.

use std::net::IpAddr;

use crate::address::canonical;

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// An exact name.
    Name(String, Option<u16>),
    /// `*.suffix`: any name ending in `.suffix` (not `suffix` itself).
    Suffix(String, Option<u16>),
    /// An address.
    Ip(IpAddr, Option<u16>),
    /// A network: address, prefix length.
    Cidr(IpAddr, u8),
}

/// The parsed allow-list; empty allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allow {
    entries: Vec<Entry>,
}

/// A host as a URL names it, canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A name to resolve.
    Name(String),
    /// A literal address (numeric aliases already decoded).
    Ip(IpAddr),
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl Host {
    /// The canonical host of a parsed URL, if it has one.
    pub fn of(url: &url::Url) -> Option<Host> {
        match url.host()? {
            url::Host::Domain(name) => {
                let name = name.strip_suffix('.').unwrap_or(name);
                Some(Host::Name(name.to_ascii_lowercase()))
            }
            url::Host::Ipv4(v4) => Some(Host::Ip(IpAddr::V4(v4))),
            url::Host::Ipv6(v6) => Some(Host::Ip(canonical(IpAddr::V6(v6)))),
        }
    }
}

/// Parses `text` as a URL's host through the WHATWG parser (so entries and
/// URLs agree on aliases), with an optional port.
fn parse_host_port(text: &str) -> Result<(Host, Option<u16>), String> {
    let url = url::Url::parse(&format!("http://{text}/"))
        .map_err(|err| format!("`{text}` is not a host, host:port, IP or CIDR ({err})"))?;
    let host = Host::of(&url).ok_or_else(|| format!("`{text}` names no host"))?;
    let clean = url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none();
    if !clean {
        return Err(format!(
            "`{text}` is not a host, host:port, IP or CIDR (it has a path, user or query)"
        ));
    }
    // `url` hides port 80 (http's default): an explicit `:80` must still count.
    let port = url.port().or_else(|| text.ends_with(":80").then_some(80));
    Ok((host, port))
}

fn parse_entry(raw: &str) -> Result<Entry, String> {
    let text = raw.trim();
    if text.is_empty() {
        return Err("an empty entry".into());
    }
    if text.len() > 300 {
        return Err(format!("`{}…` is longer than 300 characters", &text[..40]));
    }
    if let Some((net, bits)) = text.split_once('/') {
        let net = net.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = net
            .parse()
            .map_err(|_| format!("`{text}`: `{net}` is not an IP address for a CIDR"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits: u8 = bits
            .parse()
            .ok()
            .filter(|b| *b <= max)
            .ok_or_else(|| format!("`{text}`: the prefix length must be 0 to {max}"))?;
        return Ok(Entry::Cidr(canonical(ip), bits));
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        let (host, port) = parse_host_port(suffix).map_err(|e| format!("`{text}`: {e}"))?;
        return match host {
            Host::Name(name) if name.contains('.') || !name.is_empty() => {
                Ok(Entry::Suffix(name, port))
            }
            _ => Err(format!("`{text}`: a wildcard takes a name, not an address")),
        };
    }
    if text.contains('*') {
        return Err(format!(
            "`{text}`: a wildcard is allowed only as a leading `*.`"
        ));
    }
    match parse_host_port(text)? {
        (Host::Name(name), port) => Ok(Entry::Name(name, port)),
        (Host::Ip(ip), port) => Ok(Entry::Ip(ip, port)),
    }
}

fn port_matches(entry: Option<u16>, port: u16, default: u16) -> bool {
    entry.unwrap_or(default) == port
}

impl Allow {
    /// Parses the configuration's list; the error names the bad entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allow, String> {
        let entries = entries
            .iter()
            .map(|raw| parse_entry(raw.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Allow { entries })
    }

    /// Whether nothing is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a URL naming `host` on `port` may be requested (the scheme's
    /// default port is `default`). For an address this is the address
    /// rule ([`Allow::names_ip`]) too.
    pub fn allows(&self, host: &Host, port: u16, default: u16) -> bool {
        match host {
            Host::Ip(ip) => self.names_ip(*ip, port, default),
            Host::Name(name) => self.entries.iter().any(|entry| match entry {
                Entry::Name(want, p) => want == name && port_matches(*p, port, default),
                Entry::Suffix(suffix, p) => {
                    name.len() > suffix.len() + 1
                        && name.ends_with(suffix.as_str())
                        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
                        && port_matches(*p, port, default)
                }
                _ => false,
            }),
        }
    }

    /// Whether an entry names `ip` (itself, or a network containing it) for
    /// `port`: what lets a request reach a non-public address.
    pub fn names_ip(&self, ip: IpAddr, port: u16, default: u16) -> bool {
        let ip = canonical(ip);
        self.entries.iter().any(|entry| match entry {
            Entry::Ip(want, p) => *want == ip && port_matches(*p, port, default),
            Entry::Cidr(net, bits) => {
                port == default
                    && match (net, ip) {
                        (IpAddr::V4(net), IpAddr::V4(ip)) => {
                            let mask = mask(u32::BITS, *bits) as u32;
                            u32::from(*net) & mask == u32::from(ip) & mask
                        }
                        (IpAddr::V6(net), IpAddr::V6(ip)) => {
                            let mask = mask(u128::BITS, *bits);
                            u128::from(*net) & mask == u128::from(ip) & mask
                        }
                        _ => false,
                    }
            }
            _ => false,
        })
    }

    /// The entries as the guidance states them (`host:port`, …).
    pub fn describe(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|entry| match entry {
                Entry::Name(name, port) => with_port(name, *port),
                Entry::Suffix(name, port) => with_port(&format!("*.{name}"), *port),
                Entry::Ip(ip, port) => with_port(&Host::Ip(*ip).to_string(), *port),
                Entry::Cidr(net, bits) => format!("{net}/{bits}"),
            })
            .collect()
    }
}

fn mask(width: u32, bits: u8) -> u128 {
    if bits == 0 {
        0
    } else {
        (u128::MAX << (128 - u32::from(bits))) >> (128 - width)
    }
}

fn with_port(host: &str, port: Option<u16>) -> String {
    match port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Host {
        Host::of(&url::Url::parse(&format!("http://{text}/")).unwrap()).unwrap()
    }

    /// Names, suffixes, ports, addresses and networks, each as documented.
    #[test]
    fn entries_allow_what_they_say() {
        let allow = Allow::parse(&[
            "api.example.com",
            "*.svc.example:8443",
            "127.0.0.1:9000",
            "10.0.0.0/8",
            "[::1]:7000",
            "Data.Example.ORG.",
        ])
        .unwrap();
        assert!(allow.allows(&host("api.example.com"), 443, 443));
        assert!(allow.allows(&host("API.Example.com."), 80, 80));
        assert!(!allow.allows(&host("api.example.com"), 8080, 443));
        assert!(!allow.allows(&host("evil-api.example.com"), 443, 443));
        assert!(allow.allows(&host("a.svc.example"), 8443, 443));
        assert!(allow.allows(&host("a.b.svc.example"), 8443, 443));
        assert!(!allow.allows(&host("svc.example"), 8443, 443));
        assert!(!allow.allows(&host("xsvc.example"), 8443, 443));
        assert!(!allow.allows(&host("a.svc.example"), 443, 443));
        assert!(allow.allows(&host("127.0.0.1"), 9000, 80));
        assert!(!allow.allows(&host("127.0.0.1"), 9001, 80));
        assert!(allow.allows(&host("data.example.org"), 443, 443));
        // Numeric aliases are the address they spell.
        assert!(allow.allows(&host("2130706433"), 9000, 80));
        assert!(allow.allows(&host("0x7f.1"), 9000, 80));
        assert!(allow.allows(&host("[::ffff:127.0.0.1]"), 9000, 80));
        assert!(allow.allows(&host("[::1]"), 7000, 80));
        // Networks name the addresses in them, on the default port.
        assert!(allow.names_ip("10.9.8.7".parse().unwrap(), 80, 80));
        assert!(!allow.names_ip("10.9.8.7".parse().unwrap(), 81, 80));
        assert!(!allow.names_ip("11.0.0.1".parse().unwrap(), 80, 80));
        assert!(!allow.names_ip("127.0.0.2".parse().unwrap(), 9000, 80));
    }

    /// A bad entry is an error that names it.
    #[test]
    fn bad_entries_are_named() {
        for bad in [
            "",
            "http://x/",
            "a/b",
            "10.0.0.0/33",
            "*.",
            "a*.b",
            "x:99999",
            "user@host",
            "host/path",
        ] {
            let err = Allow::parse(&[bad]).unwrap_err();
            assert!(err.contains(bad.trim()) || bad.is_empty(), "{bad}: {err}");
        }
        assert_eq!(Allow::parse::<&str>(&[]).unwrap(), Allow::default());
    }

    proptest::proptest! {
        /// However an IPv4 address is spelled (decimal, hex, octal, fewer
        /// parts), a URL naming it is that address: allowed by an entry
        /// naming it, and judged as it.
        #[test]
        fn any_spelling_of_an_address_is_that_address(ip in proptest::prelude::any::<u32>(), form in 0..5u8) {
            let v4 = std::net::Ipv4Addr::from(ip);
            let o = v4.octets();
            let text = match form {
                0 => ip.to_string(),
                1 => format!("0x{ip:x}"),
                2 => format!("{}.{}", o[0], u32::from_be_bytes([0, o[1], o[2], o[3]])),
                3 => format!("0{:o}.0x{:x}.{}.{}", o[0], o[1], o[2], o[3]),
                _ => format!("[::ffff:{v4}]"),
            };
            let allow = Allow::parse(&[v4.to_string()]).unwrap();
            proptest::prop_assert!(allow.allows(&host(&text), 80, 80), "{}", text);
            proptest::prop_assert_eq!(host(&text), Host::Ip(IpAddr::V4(v4)));
            let other = Allow::parse(&[std::net::Ipv4Addr::from(ip ^ 1).to_string()]).unwrap();
            proptest::prop_assert!(!other.allows(&host(&text), 80, 80), "{}", text);
        }
    }

    /// The listing says what was configured.
    #[test]
    fn describes_entries() {
        let allow = Allow::parse(&["a.example", "*.b.example:8080", "10.0.0.0/8"]).unwrap();
        assert_eq!(
            allow.describe(),
            ["a.example", "*.b.example:8080", "10.0.0.0/8"]
        );
    }
}
