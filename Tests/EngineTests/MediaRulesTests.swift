import Testing

@testable import Engine

@Suite("Media rules")
struct MediaRulesTests {
    @Test("A name is flat, plain and ends in a known type's extension")
    func names() throws {
        #expect(try MediaName("Logo_2.PNG").kind == .png)
        #expect(try MediaName("clip.m4v").kind == .mp4)
        #expect(try MediaName("a.jpeg").kind.contentType == "image/jpeg")
        #expect(try MediaName("x.png").path(tenant: TenantID("acme")) == "/media/acme/x.png")
        for bad in [
            "", ".png", "../x.png", "a/b.png", "a b.png", "x.svg", "x.html", "x", "ü.png",
            String(repeating: "a", count: 126) + ".png",
        ] {
            #expect(throws: EngineError.self, "\(bad)") { try MediaName(bad) }
        }
    }

    @Test("The first bytes must be of the named type")
    func signatures() {
        #expect(MediaKind.png.matches([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0]))
        #expect(!MediaKind.png.matches(Array("<svg onload=x>".utf8)))
        #expect(MediaKind.jpeg.matches([0xFF, 0xD8, 0xFF, 0xE0]))
        #expect(MediaKind.gif.matches(Array("GIF89a......".utf8)))
        #expect(
            MediaKind.webp.matches(Array("RIFF\0\0\0\0WEBP".utf8))
                && !MediaKind.wav.matches(Array("RIFF\0\0\0\0WEBP".utf8))
        )
        #expect(MediaKind.wav.matches(Array("RIFF\0\0\0\0WAVE".utf8)))
        #expect(
            MediaKind.mp4.matches(Array("\0\0\0\u{18}ftypmp42".utf8))
                && MediaKind.heic.matches(Array("\0\0\0\u{18}ftypheic".utf8))
        )
        #expect(MediaKind.mp3.matches(Array("ID3\u{3}".utf8)) && MediaKind.mp3.matches([0xFF, 0xFB, 0x90]))
        #expect(MediaKind.aac.matches([0xFF, 0xF1, 0x50]))
        #expect(MediaKind.caf.matches(Array("caff\0\u{1}".utf8)))
        #expect(MediaKind.pdf.matches(Array("%PDF-1.7".utf8)) && !MediaKind.pdf.matches(Array("%PD".utf8)))
        #expect(!MediaKind.jpeg.matches([]))
    }
}
