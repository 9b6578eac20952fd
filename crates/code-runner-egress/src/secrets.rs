//! `egress_secrets`: values the guest may send without ever seeing them.
//!
//! The worker reads each value from its own environment; guest code sees an
//! opaque placeholder (`III_SECRET_<NAME>_<hex>`, the same for a worker
//! process's life, different in every process). When a request goes to one of the secret's hosts, the
//! placeholder is replaced by the value in the URL and in header values
//! (never in the body); a placeholder bound for any other host refuses the
//! request. What comes back has the value replaced by the placeholder
//! again, so a server that echoes it does not hand it to the guest.

use crate::allow::{Allow, Host};

/// One configured secret.
#[derive(Clone)]
pub struct Secret {
    name: String,
    placeholder: String,
    value: String,
    hosts: Allow,
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
}

/// A secret as the configuration declares it: its name, the environment
/// variable holding its value, and the hosts it may be sent to (patterns as
/// in `egress_allow`).
#[derive(Debug, Clone)]
pub struct SecretSpec {
    /// `NAME` (letters, digits, `_`).
    pub name: String,
    /// The worker's environment variable with the value.
    pub env: String,
    /// Patterns of the hosts it may go to.
    pub hosts: Vec<String>,
}

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
            let hosts = Allow::parse(&spec.hosts)
                .map_err(|err| format!("egress_secrets.{name}.hosts: {err}"))?;
            let value = lookup(&spec.env).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!(
                    "egress_secrets.{name}: the environment variable `{}` is not set (or empty)",
                    spec.env
                )
            })?;
            if value.len() < 4 {
                return Err(format!(
                    "egress_secrets.{name}: the value of `{}` is shorter than 4 bytes, too short to keep out of responses",
                    spec.env
                ));
            }
            secrets.push(Secret {
                placeholder: placeholder(name),
                name: name.clone(),
                value,
                hosts,
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

    /// `text` with each placeholder replaced by its value, if the request
    /// goes to `host:port` and the secret lists it; a placeholder for a
    /// host it does not list is an error naming the secret.
    pub fn substitute(
        &self,
        text: &str,
        host: &Host,
        port: u16,
        default: u16,
    ) -> Result<String, Misdirected> {
        let mut out = None::<String>;
        for secret in &self.secrets {
            let current = out.as_deref().unwrap_or(text);
            if !current.contains(&secret.placeholder) {
                continue;
            }
            if !secret.hosts.allows(host, port, default) {
                return Err(Misdirected {
                    name: secret.name.clone(),
                });
            }
            out = Some(current.replace(&secret.placeholder, &secret.value));
        }
        Ok(out.unwrap_or_else(|| text.to_string()))
    }

    /// `bytes` with every secret's value replaced by its placeholder (what
    /// comes back must never carry a value).
    pub fn scrub(&self, bytes: Vec<u8>) -> Vec<u8> {
        let mut bytes = bytes;
        for secret in &self.secrets {
            let value = secret.value.as_bytes();
            if !contains(&bytes, value) {
                continue;
            }
            let mut out = Vec::with_capacity(bytes.len());
            let mut rest = &bytes[..];
            while let Some(at) = find(rest, value) {
                out.extend_from_slice(&rest[..at]);
                out.extend_from_slice(secret.placeholder.as_bytes());
                rest = &rest[at + value.len()..];
            }
            out.extend_from_slice(rest);
            bytes = out;
        }
        bytes
    }

    /// [`Secrets::scrub`] for text.
    pub fn scrub_text(&self, text: String) -> String {
        if self.secrets.iter().all(|s| !text.contains(&s.value)) {
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

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        let spec = SecretSpec {
            name: "TOKEN".into(),
            env: "MY_TOKEN".into(),
            hosts: vec!["api.example.com".into()],
        };
        Secrets::load(&[spec], |var| {
            (var == "MY_TOKEN").then(|| "s3cr3t-v".into())
        })
        .unwrap()
    }

    /// The placeholder becomes the value for the secret's host only.
    #[test]
    fn substitutes_for_its_hosts_only() {
        let secrets = secrets();
        let (_, placeholder) = secrets.placeholders().next().unwrap();
        let header = format!("Bearer {placeholder}");
        let api = Host::Name("api.example.com".into());
        assert_eq!(
            secrets.substitute(&header, &api, 443, 443).unwrap(),
            "Bearer s3cr3t-v"
        );
        let other = Host::Name("evil.example.com".into());
        let err = secrets.substitute(&header, &other, 443, 443).unwrap_err();
        assert_eq!(err.name, "TOKEN");
        assert_eq!(
            secrets.substitute("plain", &other, 443, 443).unwrap(),
            "plain"
        );
    }

    /// A value that comes back is the placeholder again.
    #[test]
    fn scrubs_values_from_what_comes_back() {
        let secrets = secrets();
        let (_, placeholder) = secrets.placeholders().next().unwrap();
        let echoed = b"auth: s3cr3t-v and s3cr3t-v!".to_vec();
        let scrubbed = String::from_utf8(secrets.scrub(echoed)).unwrap();
        assert_eq!(scrubbed, format!("auth: {placeholder} and {placeholder}!"));
        assert!(!format!("{secrets:?}").contains("s3cr3t"));
    }

    /// A missing variable, a bad name or no hosts are errors naming the secret.
    #[test]
    fn bad_specs_are_named() {
        let spec = |name: &str, env: &str, hosts: &[&str]| SecretSpec {
            name: name.into(),
            env: env.into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        };
        let env = |var: &str| (var == "SET").then(|| "value-1".to_string());
        let err = Secrets::load(&[spec("A", "UNSET", &["x.example"])], env).unwrap_err();
        assert!(err.contains("UNSET"), "{err}");
        let err = Secrets::load(&[spec("a-b", "SET", &["x.example"])], env).unwrap_err();
        assert!(err.contains("a-b"), "{err}");
        let err = Secrets::load(&[spec("A", "SET", &[])], env).unwrap_err();
        assert!(err.contains("hosts"), "{err}");
    }
}
