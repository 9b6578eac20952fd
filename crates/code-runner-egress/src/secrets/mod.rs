//! `egress_secrets`: values the guest may send without ever seeing them.
//!
//! The worker reads each value from its own environment; guest code sees an
//! opaque placeholder (`III_SECRET_<NAME>_<hex>`, the same for a worker
//! process's life, different in every process). When a request goes to one
//! of the secret's hosts, the placeholder is replaced by the value in header
//! values, and in the URL only for a secret the operator marked `in_url`
//! (never in the body); a placeholder bound for any other host, or for a
//! host over plain `http` that the secret's entry does not spell
//! `http://…`, refuses the request. What comes back has the value, in every
//! common encoding of it ([`scrub`]), replaced by the placeholder again, so
//! a server that echoes it does not hand it to the guest.

mod scrub;

use crate::allow::{Allow, Host};
use scrub::Forms;

/// One configured secret.
#[derive(Clone)]
pub struct Secret {
    name: String,
    placeholder: String,
    value: String,
    /// Where it may go over `https`.
    hosts: Allow,
    /// Where it may go over plain `http` too (entries spelled `http://…`).
    plain_hosts: Allow,
    /// Whether it may go in a URL (else only in header values).
    in_url: bool,
    forms: Forms,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// The secrets of the configuration, with their placeholders.
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    secrets: Vec<Secret>,
}

/// Where a placeholder may not go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misdirected {
    /// The secret's name.
    pub name: String,
    /// Why not there.
    pub why: Why,
}

/// Why a placeholder may not go where it was bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The host (and port) is not one of the secret's.
    NotItsHost,
    /// The host is one of the secret's, but over plain `http`, which its
    /// entry does not allow (`http://host`).
    PlainHttp,
    /// In a URL, where the secret is not allowed (`in_url`).
    InUrl,
}

/// Where in a request a placeholder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A header's value.
    Header,
    /// The URL.
    Url,
}

/// Where a request goes: what a secret's hosts are checked against.
#[derive(Debug, Clone, Copy)]
pub struct Destination<'a> {
    /// The canonical host.
    pub host: &'a Host,
    /// The port.
    pub port: u16,
    /// The scheme's default port (80, 443).
    pub default_port: u16,
    /// Whether the scheme is `https`.
    pub https: bool,
}

/// A secret as the configuration declares it: its name, the environment
/// variable holding its value, the hosts it may be sent to (patterns as in
/// `egress_allow`, over `https` only unless spelled `http://pattern`), and
/// whether it may go in a URL.
#[derive(Debug, Clone, Default)]
pub struct SecretSpec {
    /// `NAME` (letters, digits, `_`).
    pub name: String,
    /// The worker's environment variable with the value.
    pub env: String,
    /// Patterns of the hosts it may go to.
    pub hosts: Vec<String>,
    /// Whether a URL may carry it (default: header values only).
    pub in_url: bool,
}

/// The shortest value a secret may have: shorter ones cannot be told apart
/// from ordinary text in what comes back (their encodings match by chance).
pub const MIN_SECRET_BYTES: usize = 8;

impl Secrets {
    /// Reads each secret's value from `lookup` (the environment) and makes
    /// its placeholder; the error names the secret and what is wrong.
    pub fn load(
        specs: &[SecretSpec],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Secrets, String> {
        let mut secrets = Vec::new();
        for spec in specs {
            let name = &spec.name;
            let valid = !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(format!(
                    "egress_secrets: `{name}` is not a secret name (1 to 64 letters, digits or `_`)"
                ));
            }
            if spec.hosts.is_empty() {
                return Err(format!(
                    "egress_secrets.{name}: `hosts` is empty, so the secret could go nowhere"
                ));
            }
            let (mut https, mut plain) = (Vec::new(), Vec::new());
            for entry in &spec.hosts {
                let entry = entry.trim();
                match entry.strip_prefix("http://") {
                    Some(rest) => plain.push(rest.trim_end_matches('/')),
                    None => https.push(
                        entry
                            .strip_prefix("https://")
                            .unwrap_or(entry)
                            .trim_end_matches('/'),
                    ),
                }
            }
            let parse = |list: &[&str]| {
                Allow::parse(list).map_err(|err| format!("egress_secrets.{name}.hosts: {err}"))
            };
            let (hosts, plain_hosts) = (parse(&https)?, parse(&plain)?);
            let value = lookup(&spec.env).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!(
                    "egress_secrets.{name}: the environment variable `{}` is not set (or empty)",
                    spec.env
                )
            })?;
            if value.len() < MIN_SECRET_BYTES {
                return Err(format!(
                    "egress_secrets.{name}: the value of `{}` is shorter than {MIN_SECRET_BYTES} bytes, too short to keep out of responses",
                    spec.env
                ));
            }
            secrets.push(Secret {
                placeholder: placeholder(name),
                name: name.clone(),
                forms: Forms::of(&value),
                value,
                hosts,
                plain_hosts,
                in_url: spec.in_url,
            });
        }
        Ok(Secrets { secrets })
    }

    /// `(name, placeholder)` for each secret: what the guest is shown.
    pub fn placeholders(&self) -> impl Iterator<Item = (&str, &str)> {
        self.secrets
            .iter()
            .map(|s| (s.name.as_str(), s.placeholder.as_str()))
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Whether any of `text` names a placeholder.
    pub fn names_any(&self, text: &str) -> bool {
        self.secrets.iter().any(|s| text.contains(&s.placeholder))
    }

    /// `text` with each placeholder replaced by its value, if the request
    /// goes to one of the secret's hosts, over a scheme its entry allows,
    /// and `place` is one it may stand in; otherwise an error naming the
    /// secret and why.
    pub fn substitute(
        &self,
        text: &str,
        to: Destination<'_>,
        place: Place,
    ) -> Result<String, Misdirected> {
        let mut out = None::<String>;
        for secret in &self.secrets {
            let current = out.as_deref().unwrap_or(text);
            if !current.contains(&secret.placeholder) {
                continue;
            }
            let refuse = |why| Misdirected {
                name: secret.name.clone(),
                why,
            };
            let over_https = secret.hosts.allows(to.host, to.port, to.default_port);
            let over_http = secret.plain_hosts.allows(to.host, to.port, to.default_port);
            if !over_https && !over_http {
                return Err(refuse(Why::NotItsHost));
            }
            if !to.https && !over_http {
                return Err(refuse(Why::PlainHttp));
            }
            if place == Place::Url && !secret.in_url {
                return Err(refuse(Why::InUrl));
            }
            out = Some(current.replace(&secret.placeholder, &secret.value));
        }
        Ok(out.unwrap_or_else(|| text.to_string()))
    }

    /// `bytes` with every secret's value, in every common encoding of it
    /// (plain, percent, `+` for space, JSON-escaped, base64), replaced by
    /// its placeholder: what comes back must never carry a value.
    pub fn scrub(&self, bytes: Vec<u8>) -> Vec<u8> {
        let mut bytes = bytes;
        for secret in &self.secrets {
            if let Some(replaced) = secret.forms.replace(&bytes, secret.placeholder.as_bytes()) {
                bytes = replaced;
            }
        }
        bytes
    }

    /// [`Secrets::scrub`] for text.
    pub fn scrub_text(&self, text: String) -> String {
        if self.secrets.is_empty() {
            return text;
        }
        String::from_utf8(self.scrub(text.into_bytes()))
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// The placeholder of secret `name`: the same for the worker process's
/// whole life (a kept runtime's copy stays good across configuration
/// changes), different in every process, and saying nothing of the value.
fn placeholder(name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    static SALT: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let mut hasher = SALT.get_or_init(Default::default).build_hasher();
    hasher.write(name.as_bytes());
    format!("III_SECRET_{name}_{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(hosts: &[&str], in_url: bool) -> Secrets {
        let spec = SecretSpec {
            name: "TOKEN".into(),
            env: "MY_TOKEN".into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            in_url,
        };
        Secrets::load(&[spec], |var| {
            (var == "MY_TOKEN").then(|| "s3cr3t-v".into())
        })
        .unwrap()
    }

    fn to(host: &Host, https: bool) -> Destination<'_> {
        let port = if https { 443 } else { 80 };
        Destination {
            host,
            port,
            default_port: port,
            https,
        }
    }

    /// The placeholder becomes the value for the secret's host only, over
    /// https unless its entry says `http://`, in a URL only when allowed.
    #[test]
    fn substitutes_for_its_hosts_schemes_and_places_only() {
        let secrets = loaded(&["api.example.com"], false);
        let (_, placeholder) = secrets.placeholders().next().unwrap();
        let header = format!("Bearer {placeholder}");
        let api = Host::Name("api.example.com".into());
        assert_eq!(
            secrets
                .substitute(&header, to(&api, true), Place::Header)
                .unwrap(),
            "Bearer s3cr3t-v"
        );
        let other = Host::Name("evil.example.com".into());
        let err = secrets
            .substitute(&header, to(&other, true), Place::Header)
            .unwrap_err();
        assert_eq!((err.name.as_str(), err.why), ("TOKEN", Why::NotItsHost));
        assert_eq!(
            secrets
                .substitute("plain", to(&other, true), Place::Header)
                .unwrap(),
            "plain"
        );
        // Plain http to the same host: refused unless the entry says so.
        let err = secrets
            .substitute(&header, to(&api, false), Place::Header)
            .unwrap_err();
        assert_eq!(err.why, Why::PlainHttp);
        let plain = secrets_with("http://api.example.com");
        assert!(
            plain
                .substitute(&header_of(&plain), to(&api, false), Place::Header)
                .is_ok()
        );
        // In a URL only when the operator allows it.
        let err = secrets
            .substitute(&header, to(&api, true), Place::Url)
            .unwrap_err();
        assert_eq!(err.why, Why::InUrl);
        let in_url = loaded(&["api.example.com"], true);
        let (_, placeholder) = in_url.placeholders().next().unwrap();
        assert!(
            in_url
                .substitute(&format!("/q?k={placeholder}"), to(&api, true), Place::Url)
                .is_ok()
        );
    }

    fn secrets_with(entry: &str) -> Secrets {
        loaded(&[entry], false)
    }

    fn header_of(secrets: &Secrets) -> String {
        let (_, placeholder) = secrets.placeholders().next().unwrap();
        format!("Bearer {placeholder}")
    }

    /// A value that comes back is the placeholder again.
    #[test]
    fn scrubs_values_from_what_comes_back() {
        let secrets = loaded(&["api.example.com"], false);
        let (_, placeholder) = secrets.placeholders().next().unwrap();
        let echoed = b"auth: s3cr3t-v and s3cr3t%2Dv and czNjcjN0LXY=!".to_vec();
        let scrubbed = String::from_utf8(secrets.scrub(echoed)).unwrap();
        assert!(
            !scrubbed.contains("s3cr3t") && !scrubbed.contains("czNjcjN0LX"),
            "{scrubbed}"
        );
        assert_eq!(scrubbed.matches(placeholder).count(), 3, "{scrubbed}");
        assert!(!format!("{secrets:?}").contains("s3cr3t"));
    }

    /// A missing variable, a bad name, no hosts or a short value are errors
    /// naming the secret.
    #[test]
    fn bad_specs_are_named() {
        let spec = |name: &str, env: &str, hosts: &[&str]| SecretSpec {
            name: name.into(),
            env: env.into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            in_url: false,
        };
        let env = |var: &str| match var {
            "SET" => Some("value-123".to_string()),
            "SHORT" => Some("1234567".to_string()),
            _ => None,
        };
        let err = Secrets::load(&[spec("A", "UNSET", &["x.example"])], env).unwrap_err();
        assert!(err.contains("UNSET"), "{err}");
        let err = Secrets::load(&[spec("a-b", "SET", &["x.example"])], env).unwrap_err();
        assert!(err.contains("a-b"), "{err}");
        let err = Secrets::load(&[spec("A", "SET", &[])], env).unwrap_err();
        assert!(err.contains("hosts"), "{err}");
        let err = Secrets::load(&[spec("A", "SHORT", &["x.example"])], env).unwrap_err();
        assert!(err.contains("shorter than 8 bytes"), "{err}");
        let err = Secrets::load(&[spec("A", "SET", &["http://x.example/path"])], env).unwrap_err();
        assert!(err.contains("egress_secrets.A.hosts"), "{err}");
    }
}
