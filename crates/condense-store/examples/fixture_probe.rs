// Temporary probe: render the pi-condense fixture with a minimal reader.
use condense_core::config::Config;
use condense_core::message::Message;
use condense_core::protect::Protection;
use condense_core::{render, RenderSettings};
use condense_store::replay::{replay, ReplayEntry};
use serde_json::{json, Value};

fn iso_ms(s: &str) -> i64 {
    // 2026-11-29T16:32:20.766Z
    let y: i64 = s[0..4].parse().unwrap();
    let mo: i64 = s[5..7].parse().unwrap();
    let d: i64 = s[8..10].parse().unwrap();
    let h: i64 = s[11..13].parse().unwrap();
    let mi: i64 = s[14..16].parse().unwrap();
    let se: i64 = s[17..19].parse().unwrap();
    let ms: i64 = s[20..23].parse().unwrap();
    let (yy, mm) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    ((days * 24 + h) * 60 + mi) * 60_000 + se * 1000 + ms
}

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let entries: Vec<Value> = text.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut msgs = Vec::new();
    let mut rep = Vec::new();
    for e in &entries {
        match e["type"].as_str().unwrap() {
            "message" => msgs.push(Message::from_value(&e["message"]).unwrap()),
            "custom_message" => {
                let v = json!({"role":"custom","customType":e["customType"],"content":e["content"],"display":e["display"],"details":e["details"],"timestamp":iso_ms(e["timestamp"].as_str().unwrap())});
                msgs.push(Message::from_value(&v).unwrap());
                rep.push(ReplayEntry::CustomMessage { custom_type: e["customType"].as_str().unwrap(), content: &e["content"], details: &e["details"] });
            }
            "custom" => rep.push(ReplayEntry::Custom { custom_type: e["customType"].as_str().unwrap(), data: &e["data"] }),
            _ => {}
        }
    }
    let (state, problems) = replay(rep);
    eprintln!("problems: {problems:?}");
    let config = Config::default();
    let protection = Protection::new(&config);
    let r = render(&msgs, &state, &RenderSettings { config: &config, protection: &protection });
    eprintln!("diags: {:?}", r.diagnostics);
    if let Some(q) = std::env::args().nth(2) {
        print!("{}", condense_core::query::query(&state, &[q], |_| None).text);
        return;
    }
    let out: Vec<Value> = r.messages(&msgs).iter().map(|m| m.to_value()).collect();
    println!("{}", serde_json::to_string(&out).unwrap());
}
