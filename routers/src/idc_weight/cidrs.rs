//! IDCs inferred from IP subnets: the IDC-weight rule's `idc_cidrs` (`{mt: ["10.20.0.0/16"]}`)
//! compiled into sorted, non-overlapping address ranges.
//!
//! A provider (or consumer) without an IDC parameter takes the IDC whose subnet holds its
//! host address; an explicit parameter wins. Subnets are parsed by the `ipnet` crate, IPv4
//! and IPv6. Validation reports, each at its field path (`idc_cidrs.zf[1]`): an unknown or
//! blank IDC, text that is not a CIDR, a CIDR with host bits set (`10.20.1.0/16`: the
//! intended network is ambiguous), and overlapping subnets (naming both, found in
//! O(m log m) by sorting). A lookup is a binary search over the ranges, without allocating.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use routechain_core::{FieldPath, RuleError};

/// Compiled `idc_cidrs`: address ranges → IDC index, sorted and disjoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdcCidrs {
    /// IPv4 ranges: (first, last, IDC index), sorted by first.
    v4: Box<[(u32, u32, usize)]>,
    /// IPv6 ranges: (first, last, IDC index), sorted by first.
    v6: Box<[(u128, u128, usize)]>,
}

/// One parsed subnet with where it was written.
struct Entry<'a> {
    net: IpNet,
    idc: usize,
    idc_name: &'a str,
    path: FieldPath,
    /// Position in the document's iteration order, to report the later of two overlaps.
    seq: usize,
}

impl IdcCidrs {
    /// True when no subnet is configured.
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// The number of subnets.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Compiles `raw` (IDC name → CIDRs), resolving IDC names with `idc_of`; `known` lists
    /// the known IDCs for messages. Every problem is pushed to `errors` at `path` below
    /// `base` (`base` is the `idc_cidrs` field's path).
    pub fn compile(
        raw: &BTreeMap<String, Vec<String>>,
        base: &FieldPath,
        idc_of: impl Fn(&str) -> Option<usize>,
        known: &str,
        errors: &mut Vec<RuleError>,
    ) -> IdcCidrs {
        let mut entries: Vec<Entry<'_>> = Vec::new();
        for (idc_key, list) in raw {
            let path = base.key(idc_key.as_str());
            let idc_name = idc_key.trim();
            let idc = if idc_name.is_empty() {
                errors.push(RuleError::new(
                    path.clone(),
                    "blank IDC name in `idc_cidrs`",
                ));
                None
            } else {
                let idc = idc_of(idc_name);
                if idc.is_none() {
                    errors.push(RuleError::new(
                        path.clone(),
                        format!("`idc_cidrs` names unknown IDC `{idc_name}`; it must be an IDC of `idcs` (known: {known})"),
                    ));
                }
                idc
            };
            if list.is_empty() {
                errors.push(RuleError::new(
                    path.clone(),
                    format!("IDC `{idc_name}` lists no subnet in `idc_cidrs`"),
                ));
            }
            for (i, text) in list.iter().enumerate() {
                let p = path.index(i);
                let text = text.trim();
                let net = match text.parse::<IpNet>() {
                    Ok(net) => net,
                    Err(_) => {
                        errors.push(RuleError::new(
                            p,
                            format!("`{text}` of IDC `{idc_name}` is not a CIDR subnet such as 10.20.0.0/16 or fd00::/8"),
                        ));
                        continue;
                    }
                };
                if net.trunc() != net {
                    errors.push(RuleError::new(
                        p,
                        format!(
                            "subnet `{text}` of IDC `{idc_name}` has host bits set; write its network `{}`",
                            net.trunc()
                        ),
                    ));
                    continue;
                }
                if let Some(idc) = idc {
                    let seq = entries.len();
                    entries.push(Entry {
                        net,
                        idc,
                        idc_name,
                        path: p,
                        seq,
                    });
                }
            }
        }
        check_overlaps(&mut entries, errors);
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for e in &entries {
            match e.net {
                IpNet::V4(n) => v4.push((u32::from(n.network()), u32::from(n.broadcast()), e.idc)),
                IpNet::V6(n) => {
                    v6.push((u128::from(n.network()), u128::from(n.broadcast()), e.idc))
                }
            }
        }
        IdcCidrs {
            v4: v4.into_boxed_slice(),
            v6: v6.into_boxed_slice(),
        }
    }

    /// The IDC index of `host` (an IP address, IPv6 without brackets), if a subnet holds it.
    /// A host name (not an address) has none. No allocation.
    pub fn lookup(&self, host: &str) -> Option<usize> {
        if self.is_empty() {
            return None;
        }
        match host.trim().parse::<IpAddr>().ok()? {
            IpAddr::V4(a) => find(&self.v4, u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => find(&self.v4, u32::from(v4)),
                None => find(&self.v6, u128::from(a)),
            },
        }
    }
}

/// The IDC of the range holding `a` in sorted, disjoint `ranges`.
fn find<T: Ord + Copy>(ranges: &[(T, T, usize)], a: T) -> Option<usize> {
    let i = ranges.partition_point(|&(first, _, _)| first <= a);
    let &(_, last, idc) = ranges.get(i.checked_sub(1)?)?;
    (a <= last).then_some(idc)
}

/// Sorts `entries` by first address and reports every subnet that overlaps an earlier one
/// (a sweep keeping the widest range so far), at the later-written of the two; overlapping
/// entries are then dropped so the compiled ranges stay disjoint.
fn check_overlaps(entries: &mut Vec<Entry<'_>>, errors: &mut Vec<RuleError>) {
    let key = |e: &Entry<'_>| match e.net {
        IpNet::V4(n) => (
            0u8,
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (1u8, u128::from(n.network()), u128::from(n.broadcast())),
    };
    entries.sort_by_key(|e| {
        let (family, first, last) = key(e);
        (family, first, std::cmp::Reverse(last), e.seq)
    });
    let mut keep = vec![true; entries.len()];
    // The entry whose range reaches furthest so far, per family.
    let mut widest: Option<usize> = None;
    for i in 0..entries.len() {
        let (family, first, last) = key(&entries[i]);
        if let Some(w) = widest {
            let (wf, _, wlast) = key(&entries[w]);
            if wf == family && first <= wlast {
                let (earlier, later) = if entries[w].seq < entries[i].seq {
                    (&entries[w], &entries[i])
                } else {
                    (&entries[i], &entries[w])
                };
                let message = if earlier.net == later.net {
                    format!(
                        "subnet `{}` of IDC `{}` is listed twice (also under IDC `{}` at `{}`); an address must belong to one IDC",
                        later.net, later.idc_name, earlier.idc_name, earlier.path
                    )
                } else {
                    format!(
                        "subnet `{}` of IDC `{}` overlaps subnet `{}` of IDC `{}` (at `{}`); an address must belong to one IDC",
                        later.net, later.idc_name, earlier.net, earlier.idc_name, earlier.path
                    )
                };
                errors.push(RuleError::new(later.path.clone(), message));
                keep[i] = false;
                continue;
            }
            if wf == family && last <= wlast {
                continue;
            }
        }
        widest = Some(i);
    }
    let mut k = keep.into_iter();
    entries.retain(|_| k.next().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(pairs: &[(&str, &[&str])]) -> (IdcCidrs, Vec<String>) {
        let raw: BTreeMap<String, Vec<String>> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect();
        let names = ["mt", "zf", "sh"];
        let mut errors = Vec::new();
        let t = IdcCidrs::compile(
            &raw,
            &FieldPath::root().key("idc_cidrs"),
            |n| names.iter().position(|k| k.eq_ignore_ascii_case(n)),
            "`mt`, `zf`, `sh`",
            &mut errors,
        );
        (
            t,
            errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.message))
                .collect(),
        )
    }

    #[test]
    fn addresses_map_to_the_idc_whose_subnet_holds_them() {
        let (t, errors) = compile(&[
            ("mt", &["10.20.0.0/16"]),
            ("zf", &["10.30.0.0/16", "10.31.0.0/16"]),
            ("sh", &["fd00:1::/32", "192.168.7.7/32"]),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(t.len(), 5);
        for (host, want) in [
            ("10.20.0.0", Some(0)),
            ("10.20.255.255", Some(0)),
            ("10.21.0.0", None),
            ("10.19.255.255", None),
            ("10.30.4.5", Some(1)),
            ("10.31.255.1", Some(1)),
            ("10.32.0.0", None),
            ("fd00:1::9", Some(2)),
            ("fd00:2::9", None),
            ("::ffff:10.20.1.1", Some(0)),
            ("192.168.7.7", Some(2)),
            ("192.168.7.8", None),
            ("provider.example.com", None),
            ("", None),
        ] {
            assert_eq!(t.lookup(host), want, "{host}");
        }
        assert_eq!(IdcCidrs::default().lookup("10.20.0.1"), None);
    }

    #[test]
    fn bad_subnets_are_located_errors() {
        let (_, errors) = compile(&[
            ("mt", &["10.20.0.0/16", "10.20.5.0/24"]),
            ("zf", &["10.20.0.0/16", "nonsense", "10.30.1.0/16"]),
            ("gz", &["10.40.0.0/16"]),
            ("sh", &[]),
        ]);
        assert_eq!(
            errors,
            [
                "idc_cidrs.gz: `idc_cidrs` names unknown IDC `gz`; it must be an IDC of `idcs` (known: `mt`, `zf`, `sh`)",
                "idc_cidrs.sh: IDC `sh` lists no subnet in `idc_cidrs`",
                "idc_cidrs.zf[1]: `nonsense` of IDC `zf` is not a CIDR subnet such as 10.20.0.0/16 or fd00::/8",
                "idc_cidrs.zf[2]: subnet `10.30.1.0/16` of IDC `zf` has host bits set; write its network `10.30.0.0/16`",
                "idc_cidrs.zf[0]: subnet `10.20.0.0/16` of IDC `zf` is listed twice (also under IDC `mt` at `idc_cidrs.mt[0]`); an address must belong to one IDC",
                "idc_cidrs.mt[1]: subnet `10.20.5.0/24` of IDC `mt` overlaps subnet `10.20.0.0/16` of IDC `mt` (at `idc_cidrs.mt[0]`); an address must belong to one IDC",
            ]
        );
    }

    #[test]
    fn many_subnets_check_in_n_log_n_and_stay_disjoint() {
        let nets: Vec<String> = (0..20_000)
            .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
            .collect();
        let refs: Vec<&str> = nets.iter().map(String::as_str).collect();
        let (t, errors) = compile(&[("mt", &refs)]);
        assert!(errors.is_empty());
        assert_eq!(t.lookup("10.78.31.200"), Some(0));
        assert_eq!(t.lookup("11.0.0.1"), None);
    }
}
