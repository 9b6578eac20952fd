//! Which addresses are the public internet, and what the others are.
//!
//! A guest's request may reach a public address of a host the operator
//! listed; anything else (loopback, private ranges, link-local and the cloud
//! metadata services, carrier-grade NAT, multicast, unspecified, reserved and
//! documentation ranges) only when an `egress_allow` entry names that
//! address or a CIDR containing it. IPv6 forms that carry an IPv4 address
//! (mapped, compatible, NAT64, 6to4) are judged by the address they carry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What a non-public address is, for the refusal's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`, `fc00::/7`, `fec0::/10`.
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// The cloud metadata services: `169.254.169.254`, `169.254.170.2`,
    /// `100.100.100.200`, `fd00:ec2::254`.
    Metadata,
    /// `100.64/10`, carrier-grade NAT.
    SharedNat,
    /// `224/4`, `ff00::/8`, `255.255.255.255`.
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// Reserved, benchmarking, documentation, protocol-assignment and
    /// discard ranges: nothing a guest has business reaching.
    Reserved,
}

impl Special {
    /// The word the refusal uses.
    pub fn describe(self) -> &'static str {
        match self {
            Special::Loopback => "loopback",
            Special::Private => "private",
            Special::LinkLocal => "link-local",
            Special::Metadata => "cloud metadata",
            Special::SharedNat => "carrier-grade NAT",
            Special::Multicast => "multicast",
            Special::Unspecified => "unspecified",
            Special::Reserved => "reserved",
        }
    }
}

/// `None` for a public address; what it is otherwise.
pub fn classify(ip: IpAddr) -> Option<Special> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The address to judge and connect to: an IPv4-mapped IPv6 address is its
/// IPv4 address (`[::ffff:127.0.0.1]` is `127.0.0.1`).
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<Special> {
    const METADATA: [[u8; 4]; 3] = [
        [169, 254, 169, 254],
        [169, 254, 170, 2],
        [100, 100, 100, 200],
    ];
    if METADATA.contains(&ip.octets()) {
        return Some(Special::Metadata);
    }
    let ranges: [([u8; 4], u32, Special); 17] = [
        ([0, 0, 0, 0], 8, Special::Unspecified),
        ([10, 0, 0, 0], 8, Special::Private),
        ([100, 64, 0, 0], 10, Special::SharedNat),
        ([127, 0, 0, 0], 8, Special::Loopback),
        ([169, 254, 0, 0], 16, Special::LinkLocal),
        ([172, 16, 0, 0], 12, Special::Private),
        ([192, 0, 0, 0], 24, Special::Reserved),
        ([192, 0, 2, 0], 24, Special::Reserved),
        ([192, 31, 196, 0], 24, Special::Reserved),
        ([192, 52, 193, 0], 24, Special::Reserved),
        ([192, 88, 99, 0], 24, Special::Reserved),
        ([192, 168, 0, 0], 16, Special::Private),
        ([198, 18, 0, 0], 15, Special::Reserved),
        ([198, 51, 100, 0], 24, Special::Reserved),
        ([203, 0, 113, 0], 24, Special::Reserved),
        ([224, 0, 0, 0], 4, Special::Multicast),
        ([240, 0, 0, 0], 4, Special::Reserved),
    ];
    if ip == Ipv4Addr::BROADCAST {
        return Some(Special::Multicast);
    }
    ranges
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map(|(_, _, what)| *what)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Special> {
    let seg = ip.segments();
    if ip.is_unspecified() {
        return Some(Special::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Special::Loopback);
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some(Special::Metadata);
    }
    // Forms that carry an IPv4 address: mapped (::ffff:a.b.c.d), compatible
    // (::a.b.c.d), NAT64's well-known prefix (64:ff9b::/96) and 6to4
    // (2002:AABB:CCDD::/48): the carried address decides.
    let low_v4 = Ipv4Addr::new(
        (seg[6] >> 8) as u8,
        seg[6] as u8,
        (seg[7] >> 8) as u8,
        seg[7] as u8,
    );
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if seg[..6] == [0; 6] {
        // IPv4-compatible (deprecated): nothing public is reached this way.
        return Some(Special::Reserved);
    }
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(low_v4);
    }
    if seg[0] == 0x2002 {
        let carried = Ipv4Addr::new(
            (seg[1] >> 8) as u8,
            seg[1] as u8,
            (seg[2] >> 8) as u8,
            seg[2] as u8,
        );
        return classify_v4(carried).or(Some(Special::Reserved));
    }
    let in_v6 = |net: u128, bits: u32| {
        let mask = if bits == 0 {
            0
        } else {
            u128::MAX << (128 - bits)
        };
        u128::from(ip) & mask == net & mask
    };
    let ranges: [(u128, u32, Special); 9] = [
        (0x0064_ff9b_0001 << 80, 48, Special::Reserved), // local-use NAT64
        (0x0100 << 112, 64, Special::Reserved),          // discard
        (0x2001 << 112, 32, Special::Reserved),          // Teredo
        (0x2001_0db8 << 96, 32, Special::Reserved),      // documentation
        (0x2001_0010 << 96, 28, Special::Reserved),      // ORCHID
        (0xfc00 << 112, 7, Special::Private),            // unique local
        (0xfe80 << 112, 10, Special::LinkLocal),
        (0xfec0 << 112, 10, Special::Private), // site-local (deprecated)
        (0xff00 << 112, 8, Special::Multicast),
    ];
    ranges
        .iter()
        .find(|(net, bits, _)| in_v6(*net, *bits))
        .map(|(_, _, what)| *what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Option<Special> {
        classify(text.parse().unwrap())
    }

    /// Every non-public range is named; public addresses pass.
    #[test]
    fn names_what_is_not_public() {
        use Special::*;
        let cases = [
            ("127.0.0.1", Some(Loopback)),
            ("127.255.0.9", Some(Loopback)),
            ("10.1.2.3", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(Private)),
            ("169.254.169.254", Some(Metadata)),
            ("169.254.170.2", Some(Metadata)),
            ("100.100.100.200", Some(Metadata)),
            ("169.254.1.1", Some(LinkLocal)),
            ("100.64.0.1", Some(SharedNat)),
            ("100.128.0.1", None),
            ("224.0.0.1", Some(Multicast)),
            ("255.255.255.255", Some(Multicast)),
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Unspecified)),
            ("192.0.2.1", Some(Reserved)),
            ("198.18.0.1", Some(Reserved)),
            ("240.0.0.1", Some(Reserved)),
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("::", Some(Unspecified)),
            ("::1", Some(Loopback)),
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:10.0.0.1", Some(Private)),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some(Reserved)),
            ("64:ff9b::a9fe:a9fe", Some(Metadata)),
            ("64:ff9b::808:808", None),
            ("2002:7f00:1::", Some(Loopback)),
            ("2002:808:808::", Some(Reserved)),
            ("fd00:ec2::254", Some(Metadata)),
            ("fd12::1", Some(Private)),
            ("fe80::1", Some(LinkLocal)),
            ("ff02::1", Some(Multicast)),
            ("2001:db8::1", Some(Reserved)),
            ("2001::1", Some(Reserved)),
            ("2606:4700::1111", None),
        ];
        for (text, want) in cases {
            assert_eq!(of(text), want, "{text}");
        }
    }

    /// A mapped address is judged and connected to as its IPv4 address.
    #[test]
    fn mapped_addresses_are_their_ipv4() {
        let ip: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(canonical(ip), "127.0.0.1".parse::<IpAddr>().unwrap());
        let ip: IpAddr = "2001:4860::1".parse().unwrap();
        assert_eq!(canonical(ip), ip);
    }
}
