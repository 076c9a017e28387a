//! A minimal JSON reader, so that xtask can read criterion's
//! `estimates.json` and `benchmark.json` ([`crate::bench_report`]) and stay
//! standard-library only. It accepts what `serde_json` writes; it is not a
//! validating parser.

/// A parsed JSON value. Object members keep their order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object (the first, if repeated).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(n) => Some(*n),
            _ => None,
        }
    }

    /// The value if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Parses one JSON document; anything but whitespace after it is an error.
pub fn parse(text: &str) -> Result<Json, String> {
    let mut p = Parser { s: text, i: 0 };
    let value = p.value()?;
    p.skip_ws();
    if p.i != text.len() {
        return Err(p.error("trailing characters"));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {what}", self.i)
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", byte as char)))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.skip_ws();
        let rest = &self.s[self.i..];
        for (word, value) in [
            ("null", Json::Null),
            ("true", Json::Bool(true)),
            ("false", Json::Bool(false)),
        ] {
            if rest.starts_with(word) {
                self.i += word.len();
                return Ok(value);
            }
        }
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("expected a value")),
        }
    }

    fn object(&mut self) -> Result<Json, String> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Json::Obj(members));
        }
        loop {
            self.skip_ws();
            let key = self.string()?;
            self.expect(b':')?;
            members.push((key, self.value()?));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Json::Obj(members));
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self) -> Result<Json, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Json::Arr(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.i += 1;
        }
        self.s[start..self.i]
            .parse()
            .map(Json::Num)
            .map_err(|_| self.error("bad number"))
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        let mut chars = self.s[self.i..].char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.i += at + 1;
                    return Ok(out);
                }
                '\\' => {
                    let escaped = match chars.next().map(|(_, e)| e) {
                        Some('"') => '"',
                        Some('\\') => '\\',
                        Some('/') => '/',
                        Some('b') => '\u{8}',
                        Some('f') => '\u{c}',
                        Some('n') => '\n',
                        Some('r') => '\r',
                        Some('t') => '\t',
                        Some('u') => {
                            let code = match hex4(&mut chars) {
                                Some(h @ 0xD800..=0xDBFF) => {
                                    let low = match (chars.next(), chars.next()) {
                                        (Some((_, '\\')), Some((_, 'u'))) => hex4(&mut chars),
                                        _ => None,
                                    };
                                    low.filter(|l| (0xDC00..=0xDFFF).contains(l))
                                        .map(|l| 0x10000 + ((h - 0xD800) << 10) + (l - 0xDC00))
                                }
                                other => other,
                            };
                            match code.and_then(char::from_u32) {
                                Some(c) => c,
                                None => return Err(self.error("bad \\u escape")),
                            }
                        }
                        _ => return Err(self.error("bad escape")),
                    };
                    out.push(escaped);
                }
                c => out.push(c),
            }
        }
        Err(self.error("unterminated string"))
    }
}

/// The four hex digits of a `\u` escape.
fn hex4(chars: &mut std::str::CharIndices<'_>) -> Option<u32> {
    let hex: String = chars.take(4).map(|(_, h)| h).collect();
    u32::from_str_radix(&hex, 16)
        .ok()
        .filter(|_| hex.len() == 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serde_json_writes() {
        let doc = parse(
            r#" {"a":{"point_estimate":1.5e3,"ci":[-2,0.25]},"s":"x\"\\\/\n\u00e9\ud83d\ude00","n":null,"t":true,"f":false,"e":{}} "#,
        )
        .unwrap();
        let a = doc.get("a").unwrap();
        assert_eq!(a.get("point_estimate").and_then(Json::as_f64), Some(1500.0));
        assert_eq!(
            a.get("ci"),
            Some(&Json::Arr(vec![Json::Num(-2.0), Json::Num(0.25)]))
        );
        assert_eq!(doc.get("s").and_then(Json::as_str), Some("x\"\\/\né😀"));
        assert_eq!(doc.get("n"), Some(&Json::Null));
        assert_eq!(doc.get("t"), Some(&Json::Bool(true)));
        assert_eq!(doc.get("f"), Some(&Json::Bool(false)));
        assert_eq!(doc.get("e"), Some(&Json::Obj(Vec::new())));
        assert_eq!(doc.get("missing"), None);
    }

    #[test]
    fn rejects_broken_documents() {
        for bad in [
            "",
            "{",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "[1 2]",
            "\"open",
            "\"\\q\"",
            "\"\\ud83d\"",
            "1 2",
            "-",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
