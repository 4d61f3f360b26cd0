//! The credential broker's check (issue #25): no real value of a brokered
//! credential is readable inside, judged from [`super::probe_broker`]'s
//! scan. A scan that did not finish is a FAIL, never a PASS.

use super::observe::{record, Observed, Outcome};
use crate::config::show_bytes;

pub(super) fn check_broker_no_real_values(o: &Observed) -> Outcome {
    let rec = record(o)?;
    if rec.broker.is_none() {
        return if rec.broker_off {
            Ok("deliberately off (broker = off): real credentials are bound in as they are".into())
        } else {
            Ok(format!(
                "no credential is brokered in this session (egress = {}, or none held): nothing to look for",
                format!("{:?}", rec.egress).to_lowercase()
            ))
        };
    }
    let s = match &o.broker_scan {
        Some(Ok(s)) => s,
        Some(Err(e)) => return Err(format!("the scan could not start: {e}")),
        None => return Err("the brokered credentials were not looked for".into()),
    };
    let names = s.credentials.join(", ");
    if !s.found.is_empty() {
        let mut shown: Vec<String> = s
            .found
            .iter()
            .take(5)
            .map(|(c, p)| format!("{c} in {}", p.display()))
            .collect();
        if s.found.len() > 5 {
            shown.push(format!("{} more", s.found.len() - 5));
        }
        return Err(format!(
            "the real value of a brokered credential is readable inside: {}",
            shown.join("; ")
        ));
    }
    let read = format!(
        "{} files ({}) read, {} candidates compared",
        s.files,
        show_bytes(s.bytes),
        s.candidates
    );
    if let Some(why) = &s.unfinished {
        return Err(format!(
            "the scan for the real values of {names} did not finish ({why}; {read}): what it did not read is unproven"
        ));
    }
    Ok(format!(
        "no real value of {} brokered credential{} ({names}) readable: {read}",
        s.credentials.len(),
        if s.credentials.len() == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    use super::super::probe_broker::Scan;
    use super::*;
    use crate::egress::policy::broker::{digest_of, Digests};

    fn brokered(scan: Option<Result<Scan, String>>) -> Observed {
        let mut o = Observed {
            record: Ok(super::super::fixtures::rec()),
            broker_scan: scan,
            ..Observed::default()
        };
        if let Ok(r) = o.record.as_mut() {
            r.broker = Some(Digests {
                salt: "00".into(),
                credentials: vec![digest_of("github", "gho_0123456789abcdef", b"\0")],
            });
        }
        o
    }

    fn clean() -> Scan {
        Scan {
            credentials: vec!["github".into()],
            files: 120,
            bytes: 4096,
            candidates: 2,
            ..Scan::default()
        }
    }

    #[test]
    fn a_clean_finished_scan_passes_and_says_what_it_read() {
        let d = check_broker_no_real_values(&brokered(Some(Ok(clean())))).unwrap();
        assert!(
            d.contains("1 brokered credential (github)")
                && d.contains("120 files")
                && d.contains("2 candidates"),
            "{d}"
        );
    }

    #[test]
    fn a_real_value_found_or_an_unfinished_scan_fails() {
        let mut found = clean();
        found.found = vec![("github".into(), "/home/dev/.config/gh/hosts.yml".into())];
        let e = check_broker_no_real_values(&brokered(Some(Ok(found)))).unwrap_err();
        assert!(
            e.contains("github in /home/dev/.config/gh/hosts.yml"),
            "{e}"
        );
        let mut cut = clean();
        cut.unfinished = Some("stopped at its bound of 2 files".into());
        let e = check_broker_no_real_values(&brokered(Some(Ok(cut)))).unwrap_err();
        assert!(e.contains("did not finish"), "{e}");
        let e = check_broker_no_real_values(&brokered(None)).unwrap_err();
        assert!(e.contains("not looked for"), "{e}");
        let e = check_broker_no_real_values(&brokered(Some(Err("bad salt".into())))).unwrap_err();
        assert!(e.contains("bad salt"), "{e}");
    }

    #[test]
    fn without_a_broker_it_passes_saying_why() {
        let mut o = brokered(None);
        if let Ok(r) = o.record.as_mut() {
            r.broker = None;
        }
        let d = check_broker_no_real_values(&o).unwrap();
        assert!(d.contains("no credential is brokered"), "{d}");
        if let Ok(r) = o.record.as_mut() {
            r.broker_off = true;
        }
        let d = check_broker_no_real_values(&o).unwrap();
        assert!(d.starts_with("deliberately off (broker = off)"), "{d}");
        o.record = Err("placeholder".into());
        assert!(check_broker_no_real_values(&o).is_err());
    }
}
