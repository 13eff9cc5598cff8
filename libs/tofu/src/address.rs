//! OpenTofu resource and module addresses as plain strings.

/// The address without its instance keys: `module.a["x"].aws_instance.web[0]` →
/// `module.a.aws_instance.web`. String keys may contain brackets, dots and escaped quotes.
pub fn strip_instance_keys(address: &str) -> String {
    let mut out = String::with_capacity(address.len());
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for c in address.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '"' if depth > 0 => in_string = true,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_instance_keys;

    #[test]
    fn removes_count_and_for_each_keys() {
        assert_eq!(strip_instance_keys("aws_instance.web"), "aws_instance.web");
        assert_eq!(
            strip_instance_keys("aws_instance.web[3]"),
            "aws_instance.web"
        );
        assert_eq!(
            strip_instance_keys(r#"module.a["x.y]"].module.b[0].data.t.n["q\"]["]"#),
            "module.a.module.b.data.t.n"
        );
    }
}
