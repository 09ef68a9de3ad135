/* rt_tokenizer.c — text <-> token ids for GPT-2-style byte-level BPE and SentencePiece-style BPE
 * (rt_tokenizer.h; docs/TOKENIZER.md).
 *
 * Encoding: the input is first cut at special-token texts (RT_TOK_PARSE_SPECIAL); each stretch of text
 * between is then
 *   GPT2:  cut into pieces by a hand-written scanner that behaves as the model's pre-tokenizer regex (no
 *          regex engine; \p{L}, \p{N} from the tables below, \s the White_Space property), each piece's
 *          bytes mapped to the byte-level alphabet (one symbol per byte), and merged pair by pair, lowest
 *          merge rank first, leftmost first among equals;
 *   LLAMA: spaces replaced by U+2581 (and one prepended at the start and after a special token when
 *          add_space_prefix), cut into UTF-8 characters (a byte outside a well-formed sequence alone),
 *          merged pair by pair, highest score of the merged
 *          vocabulary token first, leftmost first among equals; a final symbol outside the vocabulary
 *          becomes its bytes' <0xNN> tokens.
 * Both merge loops are one routine: symbols in a doubly linked list over the text, candidate pairs in a
 * binary heap; a candidate is stale (and skipped) when either symbol changed since it was pushed. That is
 * O(n log n) in the piece length, so hostile inputs (a megabyte without a space) stay fast.
 *
 * Invalid UTF-8 never fails: a byte that does not start a well-formed sequence is a character of its own
 * in the "other" class (neither letter, number nor space). The tokenizer is immutable after creation.
 */
#include "rt_tokenizer.h"
#include "rt_file.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Unicode classes ---------------------------------------------------------------------------------
 * General categories L* (letters) and N* (numbers) as code point ranges, generated from Python 3.11's
 * unicodedata (Unicode 14.0):
 *   [(a, b) for maximal runs a..b of c with unicodedata.category(chr(c))[0] == 'L'] (and 'N'). */
static const uint32_t rt_tok_letters[][2] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xAA, 0xAA},       {0xB5, 0xB5},       {0xBA, 0xBA},
    {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},      {0x2C6, 0x2D1},     {0x2E0, 0x2E4},
    {0x2EC, 0x2EC},     {0x2EE, 0x2EE},     {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},     {0x38E, 0x3A1},
    {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},     {0x531, 0x556},     {0x559, 0x559},
    {0x560, 0x588},     {0x5D0, 0x5EA},     {0x5EF, 0x5F2},     {0x620, 0x64A},     {0x66E, 0x66F},
    {0x671, 0x6D3},     {0x6D5, 0x6D5},     {0x6E5, 0x6E6},     {0x6EE, 0x6EF},     {0x6FA, 0x6FC},
    {0x6FF, 0x6FF},     {0x710, 0x710},     {0x712, 0x72F},     {0x74D, 0x7A5},     {0x7B1, 0x7B1},
    {0x7CA, 0x7EA},     {0x7F4, 0x7F5},     {0x7FA, 0x7FA},     {0x800, 0x815},     {0x81A, 0x81A},
    {0x824, 0x824},     {0x828, 0x828},     {0x840, 0x858},     {0x860, 0x86A},     {0x870, 0x887},
    {0x889, 0x88E},     {0x8A0, 0x8C9},     {0x904, 0x939},     {0x93D, 0x93D},     {0x950, 0x950},
    {0x958, 0x961},     {0x971, 0x980},     {0x985, 0x98C},     {0x98F, 0x990},     {0x993, 0x9A8},
    {0x9AA, 0x9B0},     {0x9B2, 0x9B2},     {0x9B6, 0x9B9},     {0x9BD, 0x9BD},     {0x9CE, 0x9CE},
    {0x9DC, 0x9DD},     {0x9DF, 0x9E1},     {0x9F0, 0x9F1},     {0x9FC, 0x9FC},     {0xA05, 0xA0A},
    {0xA0F, 0xA10},     {0xA13, 0xA28},     {0xA2A, 0xA30},     {0xA32, 0xA33},     {0xA35, 0xA36},
    {0xA38, 0xA39},     {0xA59, 0xA5C},     {0xA5E, 0xA5E},     {0xA72, 0xA74},     {0xA85, 0xA8D},
    {0xA8F, 0xA91},     {0xA93, 0xAA8},     {0xAAA, 0xAB0},     {0xAB2, 0xAB3},     {0xAB5, 0xAB9},
    {0xABD, 0xABD},     {0xAD0, 0xAD0},     {0xAE0, 0xAE1},     {0xAF9, 0xAF9},     {0xB05, 0xB0C},
    {0xB0F, 0xB10},     {0xB13, 0xB28},     {0xB2A, 0xB30},     {0xB32, 0xB33},     {0xB35, 0xB39},
    {0xB3D, 0xB3D},     {0xB5C, 0xB5D},     {0xB5F, 0xB61},     {0xB71, 0xB71},     {0xB83, 0xB83},
    {0xB85, 0xB8A},     {0xB8E, 0xB90},     {0xB92, 0xB95},     {0xB99, 0xB9A},     {0xB9C, 0xB9C},
    {0xB9E, 0xB9F},     {0xBA3, 0xBA4},     {0xBA8, 0xBAA},     {0xBAE, 0xBB9},     {0xBD0, 0xBD0},
    {0xC05, 0xC0C},     {0xC0E, 0xC10},     {0xC12, 0xC28},     {0xC2A, 0xC39},     {0xC3D, 0xC3D},
    {0xC58, 0xC5A},     {0xC5D, 0xC5D},     {0xC60, 0xC61},     {0xC80, 0xC80},     {0xC85, 0xC8C},
    {0xC8E, 0xC90},     {0xC92, 0xCA8},     {0xCAA, 0xCB3},     {0xCB5, 0xCB9},     {0xCBD, 0xCBD},
    {0xCDD, 0xCDE},     {0xCE0, 0xCE1},     {0xCF1, 0xCF2},     {0xD04, 0xD0C},     {0xD0E, 0xD10},
    {0xD12, 0xD3A},     {0xD3D, 0xD3D},     {0xD4E, 0xD4E},     {0xD54, 0xD56},     {0xD5F, 0xD61},
    {0xD7A, 0xD7F},     {0xD85, 0xD96},     {0xD9A, 0xDB1},     {0xDB3, 0xDBB},     {0xDBD, 0xDBD},
    {0xDC0, 0xDC6},     {0xE01, 0xE30},     {0xE32, 0xE33},     {0xE40, 0xE46},     {0xE81, 0xE82},
    {0xE84, 0xE84},     {0xE86, 0xE8A},     {0xE8C, 0xEA3},     {0xEA5, 0xEA5},     {0xEA7, 0xEB0},
    {0xEB2, 0xEB3},     {0xEBD, 0xEBD},     {0xEC0, 0xEC4},     {0xEC6, 0xEC6},     {0xEDC, 0xEDF},
    {0xF00, 0xF00},     {0xF40, 0xF47},     {0xF49, 0xF6C},     {0xF88, 0xF8C},     {0x1000, 0x102A},
    {0x103F, 0x103F},   {0x1050, 0x1055},   {0x105A, 0x105D},   {0x1061, 0x1061},   {0x1065, 0x1066},
    {0x106E, 0x1070},   {0x1075, 0x1081},   {0x108E, 0x108E},   {0x10A0, 0x10C5},   {0x10C7, 0x10C7},
    {0x10CD, 0x10CD},   {0x10D0, 0x10FA},   {0x10FC, 0x1248},   {0x124A, 0x124D},   {0x1250, 0x1256},
    {0x1258, 0x1258},   {0x125A, 0x125D},   {0x1260, 0x1288},   {0x128A, 0x128D},   {0x1290, 0x12B0},
    {0x12B2, 0x12B5},   {0x12B8, 0x12BE},   {0x12C0, 0x12C0},   {0x12C2, 0x12C5},   {0x12C8, 0x12D6},
    {0x12D8, 0x1310},   {0x1312, 0x1315},   {0x1318, 0x135A},   {0x1380, 0x138F},   {0x13A0, 0x13F5},
    {0x13F8, 0x13FD},   {0x1401, 0x166C},   {0x166F, 0x167F},   {0x1681, 0x169A},   {0x16A0, 0x16EA},
    {0x16F1, 0x16F8},   {0x1700, 0x1711},   {0x171F, 0x1731},   {0x1740, 0x1751},   {0x1760, 0x176C},
    {0x176E, 0x1770},   {0x1780, 0x17B3},   {0x17D7, 0x17D7},   {0x17DC, 0x17DC},   {0x1820, 0x1878},
    {0x1880, 0x1884},   {0x1887, 0x18A8},   {0x18AA, 0x18AA},   {0x18B0, 0x18F5},   {0x1900, 0x191E},
    {0x1950, 0x196D},   {0x1970, 0x1974},   {0x1980, 0x19AB},   {0x19B0, 0x19C9},   {0x1A00, 0x1A16},
    {0x1A20, 0x1A54},   {0x1AA7, 0x1AA7},   {0x1B05, 0x1B33},   {0x1B45, 0x1B4C},   {0x1B83, 0x1BA0},
    {0x1BAE, 0x1BAF},   {0x1BBA, 0x1BE5},   {0x1C00, 0x1C23},   {0x1C4D, 0x1C4F},   {0x1C5A, 0x1C7D},
    {0x1C80, 0x1C88},   {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1CE9, 0x1CEC},   {0x1CEE, 0x1CF3},
    {0x1CF5, 0x1CF6},   {0x1CFA, 0x1CFA},   {0x1D00, 0x1DBF},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2071, 0x2071},   {0x207F, 0x207F},   {0x2090, 0x209C},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},
    {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2139},
    {0x213C, 0x213F},   {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0x2D00, 0x2D25},   {0x2D27, 0x2D27},   {0x2D2D, 0x2D2D},
    {0x2D30, 0x2D67},   {0x2D6F, 0x2D6F},   {0x2D80, 0x2D96},   {0x2DA0, 0x2DA6},   {0x2DA8, 0x2DAE},
    {0x2DB0, 0x2DB6},   {0x2DB8, 0x2DBE},   {0x2DC0, 0x2DC6},   {0x2DC8, 0x2DCE},   {0x2DD0, 0x2DD6},
    {0x2DD8, 0x2DDE},   {0x2E2F, 0x2E2F},   {0x3005, 0x3006},   {0x3031, 0x3035},   {0x303B, 0x303C},
    {0x3041, 0x3096},   {0x309D, 0x309F},   {0x30A1, 0x30FA},   {0x30FC, 0x30FF},   {0x3105, 0x312F},
    {0x3131, 0x318E},   {0x31A0, 0x31BF},   {0x31F0, 0x31FF},   {0x3400, 0x4DBF},   {0x4E00, 0xA48C},
    {0xA4D0, 0xA4FD},   {0xA500, 0xA60C},   {0xA610, 0xA61F},   {0xA62A, 0xA62B},   {0xA640, 0xA66E},
    {0xA67F, 0xA69D},   {0xA6A0, 0xA6E5},   {0xA717, 0xA71F},   {0xA722, 0xA788},   {0xA78B, 0xA7CA},
    {0xA7D0, 0xA7D1},   {0xA7D3, 0xA7D3},   {0xA7D5, 0xA7D9},   {0xA7F2, 0xA801},   {0xA803, 0xA805},
    {0xA807, 0xA80A},   {0xA80C, 0xA822},   {0xA840, 0xA873},   {0xA882, 0xA8B3},   {0xA8F2, 0xA8F7},
    {0xA8FB, 0xA8FB},   {0xA8FD, 0xA8FE},   {0xA90A, 0xA925},   {0xA930, 0xA946},   {0xA960, 0xA97C},
    {0xA984, 0xA9B2},   {0xA9CF, 0xA9CF},   {0xA9E0, 0xA9E4},   {0xA9E6, 0xA9EF},   {0xA9FA, 0xA9FE},
    {0xAA00, 0xAA28},   {0xAA40, 0xAA42},   {0xAA44, 0xAA4B},   {0xAA60, 0xAA76},   {0xAA7A, 0xAA7A},
    {0xAA7E, 0xAAAF},   {0xAAB1, 0xAAB1},   {0xAAB5, 0xAAB6},   {0xAAB9, 0xAABD},   {0xAAC0, 0xAAC0},
    {0xAAC2, 0xAAC2},   {0xAADB, 0xAADD},   {0xAAE0, 0xAAEA},   {0xAAF2, 0xAAF4},   {0xAB01, 0xAB06},
    {0xAB09, 0xAB0E},   {0xAB11, 0xAB16},   {0xAB20, 0xAB26},   {0xAB28, 0xAB2E},   {0xAB30, 0xAB5A},
    {0xAB5C, 0xAB69},   {0xAB70, 0xABE2},   {0xAC00, 0xD7A3},   {0xD7B0, 0xD7C6},   {0xD7CB, 0xD7FB},
    {0xF900, 0xFA6D},   {0xFA70, 0xFAD9},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFB1D, 0xFB1D},
    {0xFB1F, 0xFB28},   {0xFB2A, 0xFB36},   {0xFB38, 0xFB3C},   {0xFB3E, 0xFB3E},   {0xFB40, 0xFB41},
    {0xFB43, 0xFB44},   {0xFB46, 0xFBB1},   {0xFBD3, 0xFD3D},   {0xFD50, 0xFD8F},   {0xFD92, 0xFDC7},
    {0xFDF0, 0xFDFB},   {0xFE70, 0xFE74},   {0xFE76, 0xFEFC},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},
    {0xFF66, 0xFFBE},   {0xFFC2, 0xFFC7},   {0xFFCA, 0xFFCF},   {0xFFD2, 0xFFD7},   {0xFFDA, 0xFFDC},
    {0x10000, 0x1000B}, {0x1000D, 0x10026}, {0x10028, 0x1003A}, {0x1003C, 0x1003D}, {0x1003F, 0x1004D},
    {0x10050, 0x1005D}, {0x10080, 0x100FA}, {0x10280, 0x1029C}, {0x102A0, 0x102D0}, {0x10300, 0x1031F},
    {0x1032D, 0x10340}, {0x10342, 0x10349}, {0x10350, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103C3},
    {0x103C8, 0x103CF}, {0x10400, 0x1049D}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10500, 0x10527},
    {0x10530, 0x10563}, {0x10570, 0x1057A}, {0x1057C, 0x1058A}, {0x1058C, 0x10592}, {0x10594, 0x10595},
    {0x10597, 0x105A1}, {0x105A3, 0x105B1}, {0x105B3, 0x105B9}, {0x105BB, 0x105BC}, {0x10600, 0x10736},
    {0x10740, 0x10755}, {0x10760, 0x10767}, {0x10780, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA},
    {0x10800, 0x10805}, {0x10808, 0x10808}, {0x1080A, 0x10835}, {0x10837, 0x10838}, {0x1083C, 0x1083C},
    {0x1083F, 0x10855}, {0x10860, 0x10876}, {0x10880, 0x1089E}, {0x108E0, 0x108F2}, {0x108F4, 0x108F5},
    {0x10900, 0x10915}, {0x10920, 0x10939}, {0x10980, 0x109B7}, {0x109BE, 0x109BF}, {0x10A00, 0x10A00},
    {0x10A10, 0x10A13}, {0x10A15, 0x10A17}, {0x10A19, 0x10A35}, {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C},
    {0x10AC0, 0x10AC7}, {0x10AC9, 0x10AE4}, {0x10B00, 0x10B35}, {0x10B40, 0x10B55}, {0x10B60, 0x10B72},
    {0x10B80, 0x10B91}, {0x10C00, 0x10C48}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x10D00, 0x10D23},
    {0x10E80, 0x10EA9}, {0x10EB0, 0x10EB1}, {0x10F00, 0x10F1C}, {0x10F27, 0x10F27}, {0x10F30, 0x10F45},
    {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4}, {0x10FE0, 0x10FF6}, {0x11003, 0x11037}, {0x11071, 0x11072},
    {0x11075, 0x11075}, {0x11083, 0x110AF}, {0x110D0, 0x110E8}, {0x11103, 0x11126}, {0x11144, 0x11144},
    {0x11147, 0x11147}, {0x11150, 0x11172}, {0x11176, 0x11176}, {0x11183, 0x111B2}, {0x111C1, 0x111C4},
    {0x111DA, 0x111DA}, {0x111DC, 0x111DC}, {0x11200, 0x11211}, {0x11213, 0x1122B}, {0x11280, 0x11286},
    {0x11288, 0x11288}, {0x1128A, 0x1128D}, {0x1128F, 0x1129D}, {0x1129F, 0x112A8}, {0x112B0, 0x112DE},
    {0x11305, 0x1130C}, {0x1130F, 0x11310}, {0x11313, 0x11328}, {0x1132A, 0x11330}, {0x11332, 0x11333},
    {0x11335, 0x11339}, {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361}, {0x11400, 0x11434},
    {0x11447, 0x1144A}, {0x1145F, 0x11461}, {0x11480, 0x114AF}, {0x114C4, 0x114C5}, {0x114C7, 0x114C7},
    {0x11580, 0x115AE}, {0x115D8, 0x115DB}, {0x11600, 0x1162F}, {0x11644, 0x11644}, {0x11680, 0x116AA},
    {0x116B8, 0x116B8}, {0x11700, 0x1171A}, {0x11740, 0x11746}, {0x11800, 0x1182B}, {0x118A0, 0x118DF},
    {0x118FF, 0x11906}, {0x11909, 0x11909}, {0x1190C, 0x11913}, {0x11915, 0x11916}, {0x11918, 0x1192F},
    {0x1193F, 0x1193F}, {0x11941, 0x11941}, {0x119A0, 0x119A7}, {0x119AA, 0x119D0}, {0x119E1, 0x119E1},
    {0x119E3, 0x119E3}, {0x11A00, 0x11A00}, {0x11A0B, 0x11A32}, {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50},
    {0x11A5C, 0x11A89}, {0x11A9D, 0x11A9D}, {0x11AB0, 0x11AF8}, {0x11C00, 0x11C08}, {0x11C0A, 0x11C2E},
    {0x11C40, 0x11C40}, {0x11C72, 0x11C8F}, {0x11D00, 0x11D06}, {0x11D08, 0x11D09}, {0x11D0B, 0x11D30},
    {0x11D46, 0x11D46}, {0x11D60, 0x11D65}, {0x11D67, 0x11D68}, {0x11D6A, 0x11D89}, {0x11D98, 0x11D98},
    {0x11EE0, 0x11EF2}, {0x11FB0, 0x11FB0}, {0x12000, 0x12399}, {0x12480, 0x12543}, {0x12F90, 0x12FF0},
    {0x13000, 0x1342E}, {0x14400, 0x14646}, {0x16800, 0x16A38}, {0x16A40, 0x16A5E}, {0x16A70, 0x16ABE},
    {0x16AD0, 0x16AED}, {0x16B00, 0x16B2F}, {0x16B40, 0x16B43}, {0x16B63, 0x16B77}, {0x16B7D, 0x16B8F},
    {0x16E40, 0x16E7F}, {0x16F00, 0x16F4A}, {0x16F50, 0x16F50}, {0x16F93, 0x16F9F}, {0x16FE0, 0x16FE1},
    {0x16FE3, 0x16FE3}, {0x17000, 0x187F7}, {0x18800, 0x18CD5}, {0x18D00, 0x18D08}, {0x1AFF0, 0x1AFF3},
    {0x1AFF5, 0x1AFFB}, {0x1AFFD, 0x1AFFE}, {0x1B000, 0x1B122}, {0x1B150, 0x1B152}, {0x1B164, 0x1B167},
    {0x1B170, 0x1B2FB}, {0x1BC00, 0x1BC6A}, {0x1BC70, 0x1BC7C}, {0x1BC80, 0x1BC88}, {0x1BC90, 0x1BC99},
    {0x1D400, 0x1D454}, {0x1D456, 0x1D49C}, {0x1D49E, 0x1D49F}, {0x1D4A2, 0x1D4A2}, {0x1D4A5, 0x1D4A6},
    {0x1D4A9, 0x1D4AC}, {0x1D4AE, 0x1D4B9}, {0x1D4BB, 0x1D4BB}, {0x1D4BD, 0x1D4C3}, {0x1D4C5, 0x1D505},
    {0x1D507, 0x1D50A}, {0x1D50D, 0x1D514}, {0x1D516, 0x1D51C}, {0x1D51E, 0x1D539}, {0x1D53B, 0x1D53E},
    {0x1D540, 0x1D544}, {0x1D546, 0x1D546}, {0x1D54A, 0x1D550}, {0x1D552, 0x1D6A5}, {0x1D6A8, 0x1D6C0},
    {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA}, {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734}, {0x1D736, 0x1D74E},
    {0x1D750, 0x1D76E}, {0x1D770, 0x1D788}, {0x1D78A, 0x1D7A8}, {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB},
    {0x1DF00, 0x1DF1E}, {0x1E100, 0x1E12C}, {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E}, {0x1E290, 0x1E2AD},
    {0x1E2C0, 0x1E2EB}, {0x1E7E0, 0x1E7E6}, {0x1E7E8, 0x1E7EB}, {0x1E7ED, 0x1E7EE}, {0x1E7F0, 0x1E7FE},
    {0x1E800, 0x1E8C4}, {0x1E900, 0x1E943}, {0x1E94B, 0x1E94B}, {0x1EE00, 0x1EE03}, {0x1EE05, 0x1EE1F},
    {0x1EE21, 0x1EE22}, {0x1EE24, 0x1EE24}, {0x1EE27, 0x1EE27}, {0x1EE29, 0x1EE32}, {0x1EE34, 0x1EE37},
    {0x1EE39, 0x1EE39}, {0x1EE3B, 0x1EE3B}, {0x1EE42, 0x1EE42}, {0x1EE47, 0x1EE47}, {0x1EE49, 0x1EE49},
    {0x1EE4B, 0x1EE4B}, {0x1EE4D, 0x1EE4F}, {0x1EE51, 0x1EE52}, {0x1EE54, 0x1EE54}, {0x1EE57, 0x1EE57},
    {0x1EE59, 0x1EE59}, {0x1EE5B, 0x1EE5B}, {0x1EE5D, 0x1EE5D}, {0x1EE5F, 0x1EE5F}, {0x1EE61, 0x1EE62},
    {0x1EE64, 0x1EE64}, {0x1EE67, 0x1EE6A}, {0x1EE6C, 0x1EE72}, {0x1EE74, 0x1EE77}, {0x1EE79, 0x1EE7C},
    {0x1EE7E, 0x1EE7E}, {0x1EE80, 0x1EE89}, {0x1EE8B, 0x1EE9B}, {0x1EEA1, 0x1EEA3}, {0x1EEA5, 0x1EEA9},
    {0x1EEAB, 0x1EEBB}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B738}, {0x2B740, 0x2B81D}, {0x2B820, 0x2CEA1},
    {0x2CEB0, 0x2EBE0}, {0x2F800, 0x2FA1D}, {0x30000, 0x3134A},
};
static const uint32_t rt_tok_numbers[][2] = {
    {0x30, 0x39},       {0xB2, 0xB3},       {0xB9, 0xB9},       {0xBC, 0xBE},       {0x660, 0x669},
    {0x6F0, 0x6F9},     {0x7C0, 0x7C9},     {0x966, 0x96F},     {0x9E6, 0x9EF},     {0x9F4, 0x9F9},
    {0xA66, 0xA6F},     {0xAE6, 0xAEF},     {0xB66, 0xB6F},     {0xB72, 0xB77},     {0xBE6, 0xBF2},
    {0xC66, 0xC6F},     {0xC78, 0xC7E},     {0xCE6, 0xCEF},     {0xD58, 0xD5E},     {0xD66, 0xD78},
    {0xDE6, 0xDEF},     {0xE50, 0xE59},     {0xED0, 0xED9},     {0xF20, 0xF33},     {0x1040, 0x1049},
    {0x1090, 0x1099},   {0x1369, 0x137C},   {0x16EE, 0x16F0},   {0x17E0, 0x17E9},   {0x17F0, 0x17F9},
    {0x1810, 0x1819},   {0x1946, 0x194F},   {0x19D0, 0x19DA},   {0x1A80, 0x1A89},   {0x1A90, 0x1A99},
    {0x1B50, 0x1B59},   {0x1BB0, 0x1BB9},   {0x1C40, 0x1C49},   {0x1C50, 0x1C59},   {0x2070, 0x2070},
    {0x2074, 0x2079},   {0x2080, 0x2089},   {0x2150, 0x2182},   {0x2185, 0x2189},   {0x2460, 0x249B},
    {0x24EA, 0x24FF},   {0x2776, 0x2793},   {0x2CFD, 0x2CFD},   {0x3007, 0x3007},   {0x3021, 0x3029},
    {0x3038, 0x303A},   {0x3192, 0x3195},   {0x3220, 0x3229},   {0x3248, 0x324F},   {0x3251, 0x325F},
    {0x3280, 0x3289},   {0x32B1, 0x32BF},   {0xA620, 0xA629},   {0xA6E6, 0xA6EF},   {0xA830, 0xA835},
    {0xA8D0, 0xA8D9},   {0xA900, 0xA909},   {0xA9D0, 0xA9D9},   {0xA9F0, 0xA9F9},   {0xAA50, 0xAA59},
    {0xABF0, 0xABF9},   {0xFF10, 0xFF19},   {0x10107, 0x10133}, {0x10140, 0x10178}, {0x1018A, 0x1018B},
    {0x102E1, 0x102FB}, {0x10320, 0x10323}, {0x10341, 0x10341}, {0x1034A, 0x1034A}, {0x103D1, 0x103D5},
    {0x104A0, 0x104A9}, {0x10858, 0x1085F}, {0x10879, 0x1087F}, {0x108A7, 0x108AF}, {0x108FB, 0x108FF},
    {0x10916, 0x1091B}, {0x109BC, 0x109BD}, {0x109C0, 0x109CF}, {0x109D2, 0x109FF}, {0x10A40, 0x10A48},
    {0x10A7D, 0x10A7E}, {0x10A9D, 0x10A9F}, {0x10AEB, 0x10AEF}, {0x10B58, 0x10B5F}, {0x10B78, 0x10B7F},
    {0x10BA9, 0x10BAF}, {0x10CFA, 0x10CFF}, {0x10D30, 0x10D39}, {0x10E60, 0x10E7E}, {0x10F1D, 0x10F26},
    {0x10F51, 0x10F54}, {0x10FC5, 0x10FCB}, {0x11052, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F},
    {0x111D0, 0x111D9}, {0x111E1, 0x111F4}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9},
    {0x11650, 0x11659}, {0x116C0, 0x116C9}, {0x11730, 0x1173B}, {0x118E0, 0x118F2}, {0x11950, 0x11959},
    {0x11C50, 0x11C6C}, {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9}, {0x11FC0, 0x11FD4}, {0x12400, 0x1246E},
    {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59}, {0x16B5B, 0x16B61}, {0x16E80, 0x16E96},
    {0x1D2E0, 0x1D2F3}, {0x1D360, 0x1D378}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9},
    {0x1E8C7, 0x1E8CF}, {0x1E950, 0x1E959}, {0x1EC71, 0x1ECAB}, {0x1ECAD, 0x1ECAF}, {0x1ECB1, 0x1ECB4},
    {0x1ED01, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C}, {0x1FBF0, 0x1FBF9},
};

enum { RT_TOK_C_END = 0, RT_TOK_C_L = 1, RT_TOK_C_N = 2, RT_TOK_C_S = 4, RT_TOK_C_O = 8 };
enum { RT_TOK_CP_END = -1, RT_TOK_CP_BAD = -2 };

static int rt_tok_in(const uint32_t (*r)[2], int n, uint32_t c)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < r[mid][0])
            hi = mid - 1;
        else if (c > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* The White_Space property (what \s matches in Unicode regex engines). */
static int rt_tok_is_space(int32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

static int rt_tok_class(int32_t c)
{
    if (c == RT_TOK_CP_END) return RT_TOK_C_END;
    if (c < 0) return RT_TOK_C_O;
    if (c < 128) {
        if ((c | 32) >= 'a' && (c | 32) <= 'z') return RT_TOK_C_L;
        if (c >= '0' && c <= '9') return RT_TOK_C_N;
        return rt_tok_is_space(c) ? RT_TOK_C_S : RT_TOK_C_O;
    }
    if (rt_tok_is_space(c)) return RT_TOK_C_S;
    if (rt_tok_in(rt_tok_letters, (int)(sizeof rt_tok_letters / sizeof rt_tok_letters[0]), (uint32_t)c))
        return RT_TOK_C_L;
    if (rt_tok_in(rt_tok_numbers, (int)(sizeof rt_tok_numbers / sizeof rt_tok_numbers[0]), (uint32_t)c))
        return RT_TOK_C_N;
    return RT_TOK_C_O;
}

/* The code point at s[pos] (strict UTF-8: no overlongs, surrogates or values past U+10FFFF) and its
 * length in *n; RT_TOK_CP_BAD with *n = 1 for a byte that starts no well-formed sequence; RT_TOK_CP_END
 * with *n = 0 at end. */
static int32_t rt_tok_utf8(const unsigned char *s, size_t pos, size_t end, int *n)
{
    if (pos >= end) {
        *n = 0;
        return RT_TOK_CP_END;
    }
    unsigned b = s[pos];
    *n = 1;
    if (b < 0x80) return (int32_t)b;
    int len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (!len || end - pos < (size_t)len) return RT_TOK_CP_BAD;
    unsigned b1 = s[pos + 1];
    unsigned lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80, hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    if (b1 < lo || b1 > hi) return RT_TOK_CP_BAD;
    int32_t c = (int32_t)(b & (0x7F >> len));
    for (int i = 1; i < len; i++) {
        unsigned bi = s[pos + (size_t)i];
        if ((bi & 0xC0) != 0x80) return RT_TOK_CP_BAD;
        c = (c << 6) | (int32_t)(bi & 0x3F);
    }
    *n = len;
    return c;
}

static int rt_tok_class_at(const unsigned char *s, size_t pos, size_t end, int *n)
{
    return rt_tok_class(rt_tok_utf8(s, pos, end, n));
}

static int rt_tok_put_utf8(unsigned char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | (c >> 6));
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* ---- pre-tokenizers ----------------------------------------------------------------------------------
 * Each scanner returns the end of the piece that starts at pos < end, exactly as the leftmost-first
 * alternation of its regex would match there; `end` is the end of the text as far as lookahead goes. */

/* The end of the run of characters of class k that starts at p. */
static size_t rt_tok_run(const unsigned char *s, size_t p, size_t end, int k)
{
    int n;
    while (p < end && rt_tok_class_at(s, p, end, &n) == k)
        p += (size_t)n;
    return p;
}

/* \s+(?!\S)|\s+ at pos (a space there); llama3 first tries \s*[\r\n]+. */
static size_t rt_tok_spaces(const unsigned char *s, size_t pos, size_t end, int newlines)
{
    size_t q = pos, last = pos, rn_end = 0;
    int n, count = 0;
    while (q < end && rt_tok_class_at(s, q, end, &n) == RT_TOK_C_S) {
        last = q;
        if (s[q] == '\r' || s[q] == '\n') rn_end = q + 1;
        q += (size_t)n;
        count++;
    }
    if (newlines && rn_end) return rn_end;
    if (count > 1 && q < end) return last;
    if (count > 0) return q;
    rt_tok_utf8(s, pos, end, &n);
    return pos + (size_t)n;
}

/* 's|'t|'re|'ve|'m|'ll|'d (ASCII case folded when fold): the match's end, or 0. */
static size_t rt_tok_contraction(const unsigned char *s, size_t pos, size_t end, int fold)
{
    if (s[pos] != '\'' || pos + 1 >= end) return 0;
    unsigned a = s[pos + 1], b = pos + 2 < end ? s[pos + 2] : 0;
    if (fold) {
        a = a >= 'A' && a <= 'Z' ? a + 32 : a;
        b = b >= 'A' && b <= 'Z' ? b + 32 : b;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t rt_tok_pre_gpt2(const unsigned char *s, size_t pos, size_t end)
{
    size_t q = rt_tok_contraction(s, pos, end, 0);
    if (q) return q;
    int n;
    size_t p = pos;
    int k = rt_tok_class_at(s, pos, end, &n);
    if (s[pos] == ' ') {
        int k1 = rt_tok_class_at(s, pos + 1, end, &n);
        if (k1 == RT_TOK_C_L || k1 == RT_TOK_C_N || k1 == RT_TOK_C_O) {
            p = pos + 1;
            k = k1;
        }
    }
    if (k == RT_TOK_C_L || k == RT_TOK_C_N || k == RT_TOK_C_O) return rt_tok_run(s, p, end, k);
    return rt_tok_spaces(s, pos, end, 0);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
 * \s+(?!\S)|\s+ */
static size_t rt_tok_pre_llama3(const unsigned char *s, size_t pos, size_t end)
{
    size_t q = rt_tok_contraction(s, pos, end, 1);
    if (q) return q;
    int n, n1;
    int k = rt_tok_class_at(s, pos, end, &n);
    if (k == RT_TOK_C_L) return rt_tok_run(s, pos, end, RT_TOK_C_L);
    if (s[pos] != '\r' && s[pos] != '\n' && k != RT_TOK_C_N &&
        rt_tok_class_at(s, pos + (size_t)n, end, &n1) == RT_TOK_C_L)
        return rt_tok_run(s, pos + (size_t)n, end, RT_TOK_C_L);
    if (k == RT_TOK_C_N) {
        q = pos;
        for (int i = 0; i < 3 && q < end && rt_tok_class_at(s, q, end, &n1) == RT_TOK_C_N; i++)
            q += (size_t)n1;
        return q;
    }
    size_t p = pos;
    if (s[pos] == ' ') k = rt_tok_class_at(s, p = pos + 1, end, &n1);
    if (k == RT_TOK_C_O) {
        q = rt_tok_run(s, p, end, RT_TOK_C_O);
        while (q < end && (s[q] == '\r' || s[q] == '\n'))
            q++;
        return q;
    }
    return rt_tok_spaces(s, pos, end, 1);
}

/* Walks the pieces of s[0, end). */
typedef struct RtTokPreIter {
    RtTokPre pre;
    const unsigned char *s;
    size_t pos, end, seg_end; /* SMOLLM: the end of the digit-free stretch at pos */
} RtTokPreIter;

/* The next piece [*b, *e): 1, or 0 at the end. */
static int rt_tok_pre_next(RtTokPreIter *it, size_t *b, size_t *e)
{
    if (it->pos >= it->end) return 0;
    size_t pos = it->pos, q = it->end;
    int n;
    switch (it->pre) {
    case RT_TOK_PRE_NONE: break;
    case RT_TOK_PRE_GPT2: q = rt_tok_pre_gpt2(it->s, pos, it->end); break;
    case RT_TOK_PRE_LLAMA3: q = rt_tok_pre_llama3(it->s, pos, it->end); break;
    case RT_TOK_PRE_SMOLLM:
        if (pos >= it->seg_end) {
            if (rt_tok_class_at(it->s, pos, it->end, &n) == RT_TOK_C_N) {
                q = pos + (size_t)n;
                break;
            }
            size_t p = pos;
            while (p < it->end && rt_tok_class_at(it->s, p, it->end, &n) != RT_TOK_C_N)
                p += (size_t)n;
            it->seg_end = p;
        }
        q = rt_tok_pre_gpt2(it->s, pos, it->seg_end);
        break;
    }
    *b = pos;
    *e = it->pos = q;
    return 1;
}

long rt_tok_pre_split(RtTokPre pre, const char *text, size_t len, size_t *ends, size_t cap)
{
    if ((!text && len) || (!ends && cap) || (unsigned)pre > RT_TOK_PRE_LLAMA3 || len > LONG_MAX) return -1;
    RtTokPreIter it = {pre, (const unsigned char *)text, 0, len, 0};
    size_t b, e;
    long count = 0;
    while (rt_tok_pre_next(&it, &b, &e)) {
        if ((size_t)count < cap) ends[count] = e;
        count++;
    }
    return count;
}

/* ---- the tokenizer ------------------------------------------------------------------------------------ */

typedef struct RtTokPair {
    uint64_t key; /* left id << 32 | right id */
    int32_t rank; /* -1: an empty slot */
    int32_t id;   /* the merged token */
} RtTokPair;

struct RtTokenizer {
    RtTokModel model;
    RtTokPre pre;
    int n;
    char *pool;          /* every token's text, back to back */
    size_t *off;         /* n + 1: token i is pool[off[i], off[i + 1]) */
    float *score;        /* n */
    unsigned char *type; /* n, RtTokType */
    int32_t *vocab;      /* open addressing on the text: ids, -1 empty */
    size_t vocab_mask;
    RtTokPair *pairs; /* ranked merges: open addressing on (left, right) */
    int ranked;       /* pairs merge by rank (GPT2; LLAMA from a tokenizer.json), else by score (LLAMA) */
    size_t pair_mask;
    int32_t byte_id[256];   /* GPT2: the token of the byte's code point; LLAMA: its <0xNN> token (or -1) */
    uint16_t byte_cp[256];  /* GPT2: bytes_to_unicode */
    int16_t cp_byte[324];   /* its inverse (-1: no byte) */
    int32_t *special;       /* CONTROL / USER_DEFINED ids with text, by first byte, then longest first */
    int special_first[257]; /* special[special_first[b] .. special_first[b + 1]) start with byte b */
    int32_t bos, eos, unk, pad;
    int add_bos, space_prefix, merges_ignored;
    size_t max_len; /* the longest token text, bytes */
};

static uint64_t rt_tok_hash(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t rt_tok_hash_pair(uint64_t key)
{
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 31);
}

/* A power of two of at least 2 * n slots. */
static size_t rt_tok_slots(size_t n)
{
    size_t s = 16;
    while (s < 2 * n)
        s *= 2;
    return s;
}

int32_t rt_tok_find(const RtTokenizer *t, const char *s, size_t len)
{
    if (!t || (!s && len)) return -1;
    for (size_t h = rt_tok_hash(s, len) & t->vocab_mask;; h = (h + 1) & t->vocab_mask) {
        int32_t id = t->vocab[h];
        if (id < 0) return -1;
        if (t->off[id + 1] - t->off[id] == len && !memcmp(t->pool + t->off[id], s, len)) return id;
    }
}

/* The merge of (a, b): its rank and result, or 0. */
static int rt_tok_pair_find(const RtTokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *id)
{
    if (a < 0 || b < 0 || !t->pairs) return 0;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t h = rt_tok_hash_pair(key) & t->pair_mask;; h = (h + 1) & t->pair_mask) {
        const RtTokPair *p = &t->pairs[h];
        if (p->rank < 0) return 0;
        if (p->key == key) {
            *rank = p->rank;
            *id = p->id;
            return 1;
        }
    }
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100 on. */
static void rt_tok_byte_map(RtTokenizer *t)
{
    int next = 256;
    memset(t->cp_byte, 0xFF, sizeof t->cp_byte);
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte_cp[b] = (uint16_t)(keep ? b : next++);
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
}

/* Is (s, len) "<0xNN>" (upper or lower case hex)? Then *byte. */
static int rt_tok_parse_byte(const char *s, size_t len, int *byte)
{
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        int c = (unsigned char)s[i];
        int d = c >= '0' && c <= '9'                 ? c - '0'
                : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10
                                                     : -1;
        if (d < 0) return 0;
        v = v * 16 + d;
    }
    *byte = v;
    return 1;
}

/* A special token, for sorting: by first byte, then longest first, then id. */
typedef struct RtTokSpecial {
    unsigned char first;
    size_t len;
    int32_t id;
} RtTokSpecial;

static int rt_tok_special_cmp(const void *pa, const void *pb)
{
    const RtTokSpecial *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* ---- creation ----------------------------------------------------------------------------------------- */

void rt_tok_destroy(RtTokenizer *t)
{
    if (!t) return;
    free(t->pool);
    free(t->off);
    free(t->score);
    free(t->type);
    free(t->vocab);
    free(t->pairs);
    free(t->special);
    free(t);
}

/* The vocabulary: texts, types, scores, the text -> id table. */
static KilnStatus rt_tok_build_vocab(RtTokenizer *t, const RtTokSpec *spec, char *err, int errlen)
{
    int n = spec->n_tokens;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const RtTokText *tk = &spec->tokens[i];
        if (!tk->s && tk->len)
            return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: token %d has no text", i);
        if (tk->len > RT_TOK_MAX_TOKEN_LEN)
            return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                                "tokenizer: token %d is %zu bytes long (at most %d)", i, tk->len,
                                RT_TOK_MAX_TOKEN_LEN);
        total += tk->len;
        if (tk->len > t->max_len) t->max_len = tk->len;
    }
    t->pool = malloc(total ? total : 1);
    t->off = malloc(sizeof *t->off * ((size_t)n + 1));
    t->score = calloc((size_t)n, sizeof *t->score);
    t->type = malloc((size_t)n);
    t->vocab_mask = rt_tok_slots((size_t)n) - 1;
    t->vocab = malloc(sizeof *t->vocab * (t->vocab_mask + 1));
    if (!t->pool || !t->off || !t->score || !t->type || !t->vocab)
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: out of memory (%d tokens)", n);
    memset(t->vocab, 0xFF, sizeof *t->vocab * (t->vocab_mask + 1));
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        t->off[i] = at;
        if (spec->tokens[i].len) memcpy(t->pool + at, spec->tokens[i].s, spec->tokens[i].len);
        at += spec->tokens[i].len;
    }
    t->off[n] = at;
    for (int i = 0; i < n; i++) {
        const char *s = t->pool + t->off[i];
        size_t len = t->off[i + 1] - t->off[i];
        int byte;
        if (spec->types) {
            if (spec->types[i] < RT_TOK_TYPE_UNDEFINED || spec->types[i] > RT_TOK_TYPE_BYTE)
                return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "tokenizer: token %d has type %d (0 .. 6)",
                                    i, (int)spec->types[i]);
            t->type[i] = (unsigned char)spec->types[i];
        } else {
            t->type[i] = spec->model == RT_TOK_MODEL_LLAMA && rt_tok_parse_byte(s, len, &byte)
                             ? RT_TOK_TYPE_BYTE
                             : RT_TOK_TYPE_NORMAL;
        }
        if (spec->scores) t->score[i] = spec->scores[i];
        size_t h = rt_tok_hash(s, len) & t->vocab_mask;
        for (;; h = (h + 1) & t->vocab_mask) {
            int32_t id = t->vocab[h];
            if (id < 0) {
                t->vocab[h] = i;
                break;
            }
            if (t->off[id + 1] - t->off[id] == len && !memcmp(t->pool + t->off[id], s, len)) break;
        }
    }
    return KILN_OK;
}

/* GPT2: the byte alphabet's tokens and the merge table. */
/* GPT2: the byte alphabet's ids. */
static void rt_tok_build_alphabet(RtTokenizer *t)
{
    rt_tok_byte_map(t);
    for (int b = 0; b < 256; b++) { /* a byte without its token is dropped when encoded (as llama.cpp) */
        unsigned char u[4];
        int m = rt_tok_put_utf8(u, t->byte_cp[b]);
        t->byte_id[b] = rt_tok_find(t, (const char *)u, (size_t)m);
    }
}

/* The ranked merges' pair table (GPT2; LLAMA given merges: a Hugging Face tokenizer.json). */
static KilnStatus rt_tok_build_merges(RtTokenizer *t, const RtTokSpec *spec, char *err, int errlen)
{
    if (spec->n_merges < 0 || (spec->n_merges && !spec->merges))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: %d merges at %p", spec->n_merges,
                            (const void *)spec->merges);
    t->pair_mask = rt_tok_slots((size_t)spec->n_merges) - 1;
    if (!(t->pairs = malloc(sizeof *t->pairs * (t->pair_mask + 1))))
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: out of memory (%d merges)",
                            spec->n_merges);
    for (size_t i = 0; i <= t->pair_mask; i++)
        t->pairs[i].rank = -1;
    char *buf = NULL;
    size_t cap = 0;
    for (int r = 0; r < spec->n_merges; r++) {
        const char *s = spec->merges[r].s;
        size_t len = spec->merges[r].len, sp = 1;
        if (!s && len) return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: merge %d has no text", r);
        while (sp < len && s[sp] != ' ')
            sp++;
        if (sp >= len) {
            free(buf);
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "tokenizer: merge %d ('%.*s') has no space", r,
                                (int)(len < 64 ? len : 64), s ? s : "");
        }
        if (len > cap) {
            char *nb = realloc(buf, len);
            if (!nb) {
                free(buf);
                return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: out of memory");
            }
            buf = nb;
            cap = len;
        }
        memcpy(buf, s, sp);
        memcpy(buf + sp, s + sp + 1, len - sp - 1);
        int32_t a = rt_tok_find(t, s, sp), b = rt_tok_find(t, s + sp + 1, len - sp - 1);
        int32_t m = rt_tok_find(t, buf, len - 1);
        if (a < 0 || b < 0 || m < 0) {
            t->merges_ignored++;
            continue;
        }
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        for (size_t h = rt_tok_hash_pair(key) & t->pair_mask;; h = (h + 1) & t->pair_mask) {
            RtTokPair *p = &t->pairs[h];
            if (p->rank < 0) {
                *p = (RtTokPair){key, r, m};
                break;
            }
            if (p->key == key) break; /* a repeated merge keeps its first rank */
        }
    }
    free(buf);
    return KILN_OK;
}

/* LLAMA: byte fallback tokens. */
static KilnStatus rt_tok_build_bytes(RtTokenizer *t, char *err, int errlen)
{
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = rt_tok_find(t, name, 6);
        if (t->byte_id[b] < 0 && t->unk < 0)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "tokenizer: the vocabulary has no byte token %s and no unknown token", name);
    }
    return KILN_OK;
}

static KilnStatus rt_tok_build_specials(RtTokenizer *t, char *err, int errlen)
{
    int count = 0;
    for (int i = 0; i < t->n; i++)
        count += (t->type[i] == RT_TOK_TYPE_CONTROL || t->type[i] == RT_TOK_TYPE_USER_DEFINED) &&
                 t->off[i + 1] > t->off[i];
    RtTokSpecial *sp = malloc(sizeof *sp * (size_t)(count ? count : 1));
    t->special = malloc(sizeof *t->special * (size_t)(count ? count : 1));
    if (!sp || !t->special) {
        free(sp);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: out of memory");
    }
    int k = 0;
    for (int i = 0; i < t->n; i++)
        if ((t->type[i] == RT_TOK_TYPE_CONTROL || t->type[i] == RT_TOK_TYPE_USER_DEFINED) &&
            t->off[i + 1] > t->off[i])
            sp[k++] = (RtTokSpecial){(unsigned char)t->pool[t->off[i]], t->off[i + 1] - t->off[i], i};
    qsort(sp, (size_t)count, sizeof *sp, rt_tok_special_cmp);
    for (int b = 0, i = 0; b <= 256; b++) {
        while (i < count && sp[i].first < b)
            i++;
        t->special_first[b] = i;
    }
    for (int i = 0; i < count; i++)
        t->special[i] = sp[i].id;
    free(sp);
    return KILN_OK;
}

KilnStatus rt_tok_create(const RtTokSpec *spec, RtTokenizer **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!spec || !out) return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: NULL spec or out");
    if (spec->n_tokens < 1 || spec->n_tokens > RT_TOK_MAX_TOKENS || !spec->tokens)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: %d tokens (1 .. %d, and an array of them)",
                            spec->n_tokens, RT_TOK_MAX_TOKENS);
    if (spec->model != RT_TOK_MODEL_GPT2 && spec->model != RT_TOK_MODEL_LLAMA)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: unknown model %d", (int)spec->model);
    if (spec->model == RT_TOK_MODEL_GPT2
            ? spec->pre == RT_TOK_PRE_NONE || (unsigned)spec->pre > RT_TOK_PRE_LLAMA3
            : spec->pre != RT_TOK_PRE_NONE)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: pre-tokenizer %d does not fit model %s",
                            (int)spec->pre, spec->model == RT_TOK_MODEL_GPT2 ? "gpt2" : "llama");
    const int32_t ids[4] = {spec->bos, spec->eos, spec->unk, spec->pad};
    static const char *const id_names[4] = {"bos", "eos", "unknown", "padding"};
    for (int i = 0; i < 4; i++)
        if (ids[i] < -1 || ids[i] >= spec->n_tokens)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "tokenizer: %s token id %d is out of range (%d tokens)", id_names[i],
                                (int)ids[i], spec->n_tokens);
    RtTokenizer *t = calloc(1, sizeof *t);
    if (!t) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: out of memory");
    t->model = spec->model;
    t->pre = spec->pre;
    t->n = spec->n_tokens;
    t->bos = spec->bos;
    t->eos = spec->eos;
    t->unk = spec->unk;
    t->pad = spec->pad;
    t->add_bos = spec->add_bos != 0;
    t->space_prefix = spec->model == RT_TOK_MODEL_LLAMA && spec->add_space_prefix;
    KilnStatus s = rt_tok_build_vocab(t, spec, err, errlen);
    if (!s && t->model == RT_TOK_MODEL_GPT2) rt_tok_build_alphabet(t);
    if (!s && t->model == RT_TOK_MODEL_LLAMA) s = rt_tok_build_bytes(t, err, errlen);
    /* LLAMA with merges: pairs merge by their rank, as Hugging Face's BPE does, not by score */
    t->ranked = t->model == RT_TOK_MODEL_GPT2 || spec->n_merges > 0;
    if (!s && t->ranked) s = rt_tok_build_merges(t, spec, err, errlen);
    if (!s) s = rt_tok_build_specials(t, err, errlen);
    if (s) {
        rt_tok_destroy(t);
        return s;
    }
    *out = t;
    return KILN_OK;
}

/* ---- from GGUF metadata ----------------------------------------------------------------------------- */

/* An optional integer id: -1 when absent or negative. */
static KilnStatus rt_tok_gguf_id(const RtGgufFile *g, const char *key, int32_t *out, char *err, int errlen)
{
    int32_t v;
    KilnStatus s = rt_gguf_get_i32(g, key, &v, err, errlen);
    *out = -1;
    if (s == KILN_ERR_ARG) return KILN_OK;
    if (s) return KILN_ERR_CORRUPT;
    if (v >= 0) *out = v;
    return KILN_OK;
}

static KilnStatus rt_tok_gguf_bool(const RtGgufFile *g, const char *key, int dflt, int *out, char *err,
                                   int errlen)
{
    KilnStatus s = rt_gguf_get_bool(g, key, out, err, errlen);
    if (s == KILN_ERR_ARG) *out = dflt;
    return s == KILN_ERR_ARG ? KILN_OK : s ? KILN_ERR_CORRUPT : KILN_OK;
}

/* An optional array: NULL when absent; KILN_ERR_CORRUPT when it is not an array of `what` with count
 * elements (count 0: any). */
static KilnStatus rt_tok_gguf_arr(const RtGgufFile *g, const char *key, int strings, uint64_t count,
                                  const RtGgufKv **out, char *err, int errlen)
{
    const RtGgufKv *kv = *out = rt_gguf_kv_find(g, key);
    if (!kv) return KILN_OK;
    if (kv->type != RT_GGUF_VAL_ARRAY)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "tokenizer: key '%s' is a %s, not an array of %s",
                            key, rt_gguf_val_name(kv->type), strings ? "strings" : "numbers");
    if (strings ? kv->elem != RT_GGUF_VAL_STRING : kv->elem == RT_GGUF_VAL_STRING)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "tokenizer: key '%s' is an array of %s, not of %s",
                            key, rt_gguf_val_name(kv->elem), strings ? "strings" : "numbers");
    if (count && kv->count != count)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "tokenizer: key '%s' has %llu elements, not %llu (one per token)", key,
                            (unsigned long long)kv->count, (unsigned long long)count);
    return KILN_OK;
}

KilnStatus rt_tok_create_gguf(const RtGgufFile *g, RtTokenizer **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!g || !out) return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: NULL file or out");
    RtTokSpec spec = {0};
    const RtGgufKv *tokens, *types, *scores, *merges;
    const char *str;
    uint64_t len;
    RtTokText *texts = NULL, *mtexts = NULL;
    int32_t *tvals = NULL;
    float *svals = NULL;
    KilnStatus s = rt_gguf_get_str(g, "tokenizer.ggml.model", &str, &len, err, errlen);
    if (s == KILN_ERR_ARG)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "tokenizer: the file has no key 'tokenizer.ggml.model'");
    if (s) return KILN_ERR_CORRUPT;
    if (len == 4 && !memcmp(str, "gpt2", 4))
        spec.model = RT_TOK_MODEL_GPT2;
    else if (len == 5 && !memcmp(str, "llama", 5))
        spec.model = RT_TOK_MODEL_LLAMA;
    else
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "tokenizer: model '%.*s' is not supported (gpt2, llama)",
                            (int)(len < 64 ? len : 64), str);
    spec.pre = RT_TOK_PRE_NONE;
    if (spec.model == RT_TOK_MODEL_GPT2) {
        s = rt_gguf_get_str(g, "tokenizer.ggml.pre", &str, &len, err, errlen);
        if (s == KILN_ERR_ARG || (len == 4 && !memcmp(str, "gpt2", 4)))
            spec.pre = RT_TOK_PRE_GPT2;
        else if (s)
            return KILN_ERR_CORRUPT;
        else if (len == 6 && !memcmp(str, "smollm", 6))
            spec.pre = RT_TOK_PRE_SMOLLM;
        else if ((len == 9 && !memcmp(str, "llama-bpe", 9)) || (len == 6 && !memcmp(str, "llama3", 6)))
            spec.pre = RT_TOK_PRE_LLAMA3;
        else
            return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                                "tokenizer: pre-tokenizer '%.*s' is not supported (smollm, llama-bpe, gpt2)",
                                (int)(len < 64 ? len : 64), str);
    }
    if ((s = rt_tok_gguf_arr(g, "tokenizer.ggml.tokens", 1, 0, &tokens, err, errlen))) return s;
    if (!tokens)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "tokenizer: the file has no key 'tokenizer.ggml.tokens'");
    if (tokens->count < 1 || tokens->count > RT_TOK_MAX_TOKENS)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "tokenizer: %llu tokens (1 .. %d)",
                            (unsigned long long)tokens->count, RT_TOK_MAX_TOKENS);
    spec.n_tokens = (int)tokens->count;
    if ((s = rt_tok_gguf_arr(g, "tokenizer.ggml.token_type", 0, tokens->count, &types, err, errlen)) ||
        (s = rt_tok_gguf_arr(g, "tokenizer.ggml.scores", 0, tokens->count, &scores, err, errlen)) ||
        (s = rt_tok_gguf_arr(g, "tokenizer.ggml.merges", 1, 0, &merges, err, errlen)))
        return s;
    if (spec.model == RT_TOK_MODEL_GPT2 && !merges)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "tokenizer: the file has no key 'tokenizer.ggml.merges'");
    if (merges && merges->count > INT_MAX)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "tokenizer: %llu merges",
                            (unsigned long long)merges->count);
    if ((s = rt_tok_gguf_id(g, "tokenizer.ggml.bos_token_id", &spec.bos, err, errlen)) ||
        (s = rt_tok_gguf_id(g, "tokenizer.ggml.eos_token_id", &spec.eos, err, errlen)) ||
        (s = rt_tok_gguf_id(g, "tokenizer.ggml.unknown_token_id", &spec.unk, err, errlen)) ||
        (s = rt_tok_gguf_id(g, "tokenizer.ggml.padding_token_id", &spec.pad, err, errlen)) ||
        (s = rt_tok_gguf_bool(g, "tokenizer.ggml.add_bos_token", spec.model == RT_TOK_MODEL_LLAMA,
                              &spec.add_bos, err, errlen)) ||
        (s = rt_tok_gguf_bool(g, "tokenizer.ggml.add_space_prefix", spec.model == RT_TOK_MODEL_LLAMA,
                              &spec.add_space_prefix, err, errlen)))
        return s;

    texts = malloc(sizeof *texts * (size_t)spec.n_tokens);
    if (types) tvals = malloc(sizeof *tvals * (size_t)spec.n_tokens);
    if (scores) svals = malloc(sizeof *svals * (size_t)spec.n_tokens);
    if (merges && merges->count) mtexts = malloc(sizeof *mtexts * (size_t)merges->count);
    if (!texts || (types && !tvals) || (scores && !svals) || (merges && merges->count && !mtexts)) {
        s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: out of memory (%d tokens)", spec.n_tokens);
        goto done;
    }
    for (int i = 0; i < spec.n_tokens; i++) {
        texts[i].s = rt_gguf_arr_str(tokens, (uint64_t)i, &len);
        texts[i].len = (size_t)len;
        if (types) {
            int64_t v = -1;
            if (rt_gguf_arr_i64(types, (uint64_t)i, &v) || v < 0 || v > RT_TOK_TYPE_BYTE) {
                s = rt_file_errf(
                    err, errlen, KILN_ERR_CORRUPT,
                    "tokenizer: key 'tokenizer.ggml.token_type': element %d is not a type in 0 .. 6", i);
                goto done;
            }
            tvals[i] = (int32_t)v;
        }
        if (scores && rt_gguf_arr_f32(scores, (uint64_t)i, &svals[i])) {
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                             "tokenizer: key 'tokenizer.ggml.scores': element %d is not a float", i);
            goto done;
        }
    }
    if (merges && spec.model == RT_TOK_MODEL_GPT2) { /* llama: merged by score (its merges unused) */
        spec.n_merges = (int)merges->count;
        for (int i = 0; i < spec.n_merges; i++) {
            mtexts[i].s = rt_gguf_arr_str(merges, (uint64_t)i, &len);
            mtexts[i].len = (size_t)len;
        }
    }
    spec.tokens = texts;
    spec.types = tvals;
    spec.scores = svals;
    spec.merges = mtexts;
    s = rt_tok_create(&spec, out, err, errlen);
done:
    free(texts);
    free(tvals);
    free(svals);
    free(mtexts);
    return s;
}

/* ---- encoding ----------------------------------------------------------------------------------------- */

typedef struct RtTokVec {
    int32_t *v;
    size_t n, cap;
    int oom;
} RtTokVec;

static void rt_tok_push(RtTokVec *o, int32_t id)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 64;
        int32_t *v = o->oom ? NULL : realloc(o->v, sizeof *v * cap);
        if (!v) {
            o->oom = 1;
            return;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
}

/* A symbol of the merge loop: bytes [start, start + len) of the text, its token (-1: none yet), its
 * neighbours (-1: none). len 0: merged into its left neighbour. */
typedef struct RtTokSym {
    int32_t start, len, id, prev, next;
} RtTokSym;

/* A candidate merge of symbols left and next(left), as they were when pushed. */
typedef struct RtTokCand {
    double prio; /* lower first: GPT2 the rank, LLAMA minus the score */
    int32_t left, right, lid, rid, llen, rlen, id;
} RtTokCand;

/* Scratch, grown to the largest piece seen; oom set when growing failed (the result is then discarded). */
typedef struct RtTokWork {
    RtTokSym *sym;
    size_t n_sym_cap;
    RtTokCand *heap;
    size_t n_heap, heap_cap;
    unsigned char *buf; /* GPT2: a piece in the byte alphabet; LLAMA: the escaped text */
    size_t buf_cap;
    int oom;
} RtTokWork;

/* Room for n symbols and 3n + 3 bytes of buf: 1, or 0 (w->oom set). */
static int rt_tok_reserve(RtTokWork *w, size_t n)
{
    if (w->oom) return 0;
    if (n > w->n_sym_cap) {
        RtTokSym *s = realloc(w->sym, sizeof *s * n);
        if (!s) return !(w->oom = 1);
        w->sym = s;
        w->n_sym_cap = n;
    }
    if (3 * n + 3 > w->buf_cap) {
        unsigned char *b = realloc(w->buf, 3 * n + 3);
        if (!b) return !(w->oom = 1);
        w->buf = b;
        w->buf_cap = 3 * n + 3;
    }
    return 1;
}

static int rt_tok_cand_less(const RtTokCand *a, const RtTokCand *b)
{
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

static void rt_tok_heap_push(RtTokWork *w, RtTokCand c)
{
    if (w->n_heap == w->heap_cap) {
        size_t cap = w->heap_cap ? 2 * w->heap_cap : 256;
        RtTokCand *h = realloc(w->heap, sizeof *h * cap);
        if (!h) {
            w->oom = 1;
            return;
        }
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0 && rt_tok_cand_less(&c, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = c;
}

static RtTokCand rt_tok_heap_pop(RtTokWork *w)
{
    RtTokCand top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && rt_tok_cand_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!rt_tok_cand_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Pushes the merge of symbols l and r when the model has one. */
static void rt_tok_try_pair(const RtTokenizer *t, RtTokWork *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    const RtTokSym *a = &w->sym[l], *b = &w->sym[r];
    RtTokCand c = {0, l, r, a->id, b->id, a->len, b->len, -1};
    int32_t rank;
    if (t->ranked) {
        if (a->id < 0 || b->id < 0 || !rt_tok_pair_find(t, a->id, b->id, &rank, &c.id)) return;
        c.prio = rank;
    } else {
        if ((c.id = rt_tok_find(t, (const char *)w->buf + a->start, (size_t)a->len + (size_t)b->len)) < 0)
            return;
        c.prio = -(double)t->score[c.id];
    }
    rt_tok_heap_push(w, c);
}

/* Merges the n symbols in w->sym (linked in order) until no candidate is left. */
static void rt_tok_merge(const RtTokenizer *t, RtTokWork *w, int32_t n)
{
    w->n_heap = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        rt_tok_try_pair(t, w, i, i + 1);
    while (w->n_heap && !w->oom) {
        RtTokCand c = rt_tok_heap_pop(w);
        RtTokSym *a = &w->sym[c.left], *b = &w->sym[c.right];
        if (a->len != c.llen || b->len != c.rlen || a->id != c.lid || b->id != c.rid || a->next != c.right)
            continue;
        a->id = c.id;
        a->len += b->len;
        a->next = b->next;
        if (b->next >= 0) w->sym[b->next].prev = c.left;
        b->len = 0;
        rt_tok_try_pair(t, w, a->prev, c.left);
        rt_tok_try_pair(t, w, c.left, a->next);
    }
}

static void rt_tok_link(RtTokWork *w, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        w->sym[i].prev = i - 1;
        w->sym[i].next = i + 1 < n ? i + 1 : -1;
    }
}

/* GPT2: one piece of bytes. */
static void rt_tok_encode_piece(const RtTokenizer *t, RtTokWork *w, const unsigned char *p, size_t len,
                                RtTokVec *o)
{
    if (!rt_tok_reserve(w, len)) return;
    if (t->pre == RT_TOK_PRE_LLAMA3) { /* ignore_merges: a piece that is a token is that token */
        size_t m = 0;
        for (size_t i = 0; i < len; i++)
            m += (size_t)rt_tok_put_utf8(w->buf + m, t->byte_cp[p[i]]);
        int32_t id = rt_tok_find(t, (const char *)w->buf, m);
        if (id >= 0) {
            rt_tok_push(o, id);
            return;
        }
    }
    for (size_t i = 0; i < len; i++)
        w->sym[i] = (RtTokSym){(int32_t)i, 1, t->byte_id[p[i]], 0, 0};
    if (len == 1) {
        if (w->sym[0].id >= 0) rt_tok_push(o, w->sym[0].id);
        return;
    }
    rt_tok_link(w, (int32_t)len);
    rt_tok_merge(t, w, (int32_t)len);
    for (int32_t i = 0; i >= 0; i = w->sym[i].next)
        if (w->sym[i].id >= 0) rt_tok_push(o, w->sym[i].id);
}

/* LLAMA: one stretch of text, with a space before it when prefix. */
static void rt_tok_encode_spm(const RtTokenizer *t, RtTokWork *w, const unsigned char *p, size_t len,
                              int prefix, RtTokVec *o)
{
    size_t m = 0;
    if (!rt_tok_reserve(w, len + 1)) return; /* a symbol per input byte at most, and the prefix */
    if (prefix) {
        memcpy(w->buf, "\xE2\x96\x81", 3);
        m = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] == ' ') {
            memcpy(w->buf + m, "\xE2\x96\x81", 3);
            m += 3;
        } else {
            w->buf[m++] = p[i];
        }
    }
    /* Characters by strict UTF-8: a byte outside a well-formed sequence is a symbol of its own, so an
     * escaped space is always one symbol (llama.cpp trusts the lead byte; the same on well-formed text). */
    int32_t n = 0;
    for (size_t i = 0; i < m; n++) {
        int cl;
        rt_tok_utf8(w->buf, i, m, &cl);
        w->sym[n] = (RtTokSym){(int32_t)i, cl, rt_tok_find(t, (const char *)w->buf + i, (size_t)cl), 0, 0};
        i += (size_t)cl;
    }
    rt_tok_link(w, n);
    rt_tok_merge(t, w, n);
    for (int32_t i = 0; n && i >= 0; i = w->sym[i].next) {
        const RtTokSym *s = &w->sym[i];
        if (s->id >= 0) {
            rt_tok_push(o, s->id);
            continue;
        }
        for (int32_t k = 0; k < s->len; k++) {
            int32_t id = t->byte_id[w->buf[s->start + k]];
            rt_tok_push(o, id >= 0 ? id : t->unk);
        }
    }
}

/* The first special token at or after pos: 1 and its position, id and length, or 0. */
static int rt_tok_find_special(const RtTokenizer *t, const unsigned char *s, size_t pos, size_t len,
                               size_t *at, int32_t *id, size_t *tlen)
{
    for (size_t i = pos; i < len; i++) {
        for (int k = t->special_first[s[i]]; k < t->special_first[s[i] + 1]; k++) {
            int32_t c = t->special[k];
            size_t cl = t->off[c + 1] - t->off[c];
            if (cl <= len - i && !memcmp(s + i, t->pool + t->off[c], cl)) {
                *at = i;
                *id = c;
                *tlen = cl;
                return 1;
            }
        }
    }
    return 0;
}

/* The first special token at or after pos whose bytes are all marked (marks NULL: any). */
static int rt_tok_find_marked(const RtTokenizer *t, const unsigned char *s, size_t pos, size_t len,
                              const unsigned char *marks, size_t *at, int32_t *id, size_t *tlen)
{
    for (size_t from = pos; from < len && rt_tok_find_special(t, s, from, len, at, id, tlen);
         from = *at + 1) {
        size_t k = 0;
        while (marks && k < *tlen && marks[*at + k])
            k++;
        if (!marks || k == *tlen) return 1;
    }
    *at = len, *id = -1, *tlen = 0;
    return 0;
}

KilnStatus rt_tok_encode(const RtTokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int cap,
                         int *n, char *err, int errlen)
{
    return rt_tok_encode_marked(t, text, len, NULL, flags, ids, cap, n, err, errlen);
}

KilnStatus rt_tok_encode_marked(const RtTokenizer *t, const char *text, size_t len,
                                const unsigned char *marks, int flags, int32_t *ids, int cap, int *n,
                                char *err, int errlen)
{
    if (n) *n = 0;
    if (!t || !n || (!text && len) || cap < 0 || (!ids && cap > 0))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: encode: bad arguments");
    if (len > (size_t)INT32_MAX / 4)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: encode: %zu bytes of text (at most %d)",
                            len, INT32_MAX / 4);
    const unsigned char *s = (const unsigned char *)text;
    RtTokVec o = {0};
    RtTokWork w = {0};
    if ((flags & RT_TOK_ADD_BOS) && t->bos >= 0) rt_tok_push(&o, t->bos);
    size_t pos = 0;
    int after_special = 1;
    while (pos < len && !o.oom && !w.oom) {
        size_t at = len, tlen = 0;
        int32_t sid = -1;
        if (flags & RT_TOK_PARSE_SPECIAL) rt_tok_find_marked(t, s, pos, len, marks, &at, &sid, &tlen);
        if (at > pos) {
            if (t->model == RT_TOK_MODEL_LLAMA) {
                rt_tok_encode_spm(t, &w, s + pos, at - pos, t->space_prefix && after_special, &o);
            } else {
                RtTokPreIter it = {t->pre, s + pos, 0, at - pos, 0};
                size_t b, e;
                while (rt_tok_pre_next(&it, &b, &e))
                    rt_tok_encode_piece(t, &w, s + pos + b, e - b, &o);
            }
            after_special = 0;
        }
        if (sid >= 0) {
            rt_tok_push(&o, sid);
            after_special = 1;
        }
        pos = at + tlen;
    }
    free(w.sym);
    free(w.heap);
    free(w.buf);
    if (o.oom || w.oom) {
        free(o.v);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM,
                            "tokenizer: encode: out of memory (%zu bytes of text)", len);
    }
    if (o.n > INT32_MAX) {
        free(o.v);
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: encode: more than %d ids", INT32_MAX);
    }
    if (o.n && cap) memcpy(ids, o.v, sizeof *ids * (o.n < (size_t)cap ? o.n : (size_t)cap));
    *n = (int)o.n;
    free(o.v);
    return KILN_OK;
}

/* ---- decoding ----------------------------------------------------------------------------------------- */

void rt_tok_decoder_init(RtTokDecoder *d, int flags)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->flags = flags;
    d->strip = (flags & RT_TOK_DEC_STRIP_SPACE) != 0;
}

size_t rt_tok_decode_cap(const RtTokenizer *t)
{
    return (t ? t->max_len : 0) + 4;
}

/* The bytes of token id (before the UTF-8 hold-back) at o; returns how many. At most the text's length. */
static size_t rt_tok_piece(const RtTokenizer *t, int32_t id, int flags, unsigned char *o)
{
    const unsigned char *s = (const unsigned char *)t->pool + t->off[id];
    size_t len = t->off[id + 1] - t->off[id], m = 0;
    int byte;
    switch (t->type[id]) {
    case RT_TOK_TYPE_CONTROL:
    case RT_TOK_TYPE_UNKNOWN:
        if (!(flags & RT_TOK_DEC_SPECIAL)) return 0;
        /* fall through */
    case RT_TOK_TYPE_USER_DEFINED: memcpy(o, s, len); return len;
    case RT_TOK_TYPE_BYTE:
        if (rt_tok_parse_byte((const char *)s, len, &byte)) {
            o[0] = (unsigned char)byte;
            return 1;
        }
        break;
    default: break;
    }
    if (t->model == RT_TOK_MODEL_LLAMA) {
        for (size_t i = 0; i < len; i++) {
            if (i + 2 < len && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
                o[m++] = ' ';
                i += 2;
            } else {
                o[m++] = s[i];
            }
        }
        return m;
    }
    for (size_t i = 0; i < len;) { /* the byte alphabet back to bytes; anything else as it is */
        int n;
        int32_t c = rt_tok_utf8(s, i, len, &n);
        if (c >= 0 && c < 324 && t->cp_byte[c] >= 0)
            o[m++] = (unsigned char)t->cp_byte[c];
        else
            for (int k = 0; k < n; k++)
                o[m++] = s[i + (size_t)k];
        i += (size_t)n;
    }
    return m;
}

/* How many bytes at the end of s[0, n) are a proper prefix of a well-formed UTF-8 character: 0 .. 3. */
static size_t rt_tok_partial(const unsigned char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned b = s[n - k];
        if ((b & 0xC0) == 0x80) continue;
        size_t need = b >= 0xC2 && b <= 0xDF   ? 2
                      : b >= 0xE0 && b <= 0xEF ? 3
                      : b >= 0xF0 && b <= 0xF4 ? 4
                                               : 0;
        if (need <= k) return 0;
        if (k >= 2) {
            unsigned b1 = s[n - k + 1];
            unsigned lo = b == 0xE0   ? 0xA0
                          : b == 0xF0 ? 0x90
                                      : 0x80,
                     hi = b == 0xED   ? 0x9F
                          : b == 0xF4 ? 0x8F
                                      : 0xBF;
            if (b1 < lo || b1 > hi) return 0;
        }
        return k;
    }
    return 0;
}

int rt_tok_decode_next(const RtTokenizer *t, RtTokDecoder *d, int32_t id, char *out)
{
    if (!t || !d || !out || id < 0 || id >= t->n || d->n_pend < 0 || d->n_pend > 3) return -1;
    unsigned char *o = (unsigned char *)out;
    memcpy(o, d->pend, (size_t)d->n_pend);
    size_t m = rt_tok_piece(t, id, d->flags, o + d->n_pend);
    if (t->type[id] == RT_TOK_TYPE_CONTROL) {
        d->strip = (d->flags & RT_TOK_DEC_STRIP_SPACE) != 0;
    } else if (d->strip) {
        d->strip = 0;
        if (t->space_prefix && m && o[d->n_pend] == ' ') memmove(o + d->n_pend, o + d->n_pend + 1, --m);
    }
    size_t total = (size_t)d->n_pend + m, keep = rt_tok_partial(o, total);
    memcpy(d->pend, o + total - keep, keep);
    d->n_pend = (int)keep;
    return (int)(total - keep);
}

int rt_tok_decoder_flush(RtTokDecoder *d, char *out)
{
    if (!d || !out || d->n_pend < 0 || d->n_pend > 3) return 0;
    int n = d->n_pend;
    memcpy(out, d->pend, (size_t)n);
    rt_tok_decoder_init(d, d->flags);
    return n;
}

KilnStatus rt_tok_decode(const RtTokenizer *t, const int32_t *ids, int n, int flags, char *out, size_t cap,
                         size_t *len, char *err, int errlen)
{
    if (len) *len = 0;
    if (!t || !len || n < 0 || (!ids && n > 0) || (!out && cap > 0))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: decode: bad arguments");
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n)
            return rt_file_errf(err, errlen, KILN_ERR_ARG,
                                "tokenizer: decode: id %d (at %d) is out of range (%d tokens)", (int)ids[i],
                                i, t->n);
    char *buf = malloc(rt_tok_decode_cap(t));
    if (!buf) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "tokenizer: decode: out of memory");
    RtTokDecoder d;
    rt_tok_decoder_init(&d, flags);
    size_t total = 0;
    for (int i = 0; i <= n; i++) {
        size_t m =
            i < n ? (size_t)rt_tok_decode_next(t, &d, ids[i], buf) : (size_t)rt_tok_decoder_flush(&d, buf);
        if (total < cap) memcpy(out + total, buf, m < cap - total ? m : cap - total);
        total += m;
    }
    free(buf);
    *len = total;
    return KILN_OK;
}

/* ---- accessors ---------------------------------------------------------------------------------------- */

RtTokModel rt_tok_model(const RtTokenizer *t)
{
    return t ? t->model : RT_TOK_MODEL_GPT2;
}

RtTokPre rt_tok_pre(const RtTokenizer *t)
{
    return t ? t->pre : RT_TOK_PRE_NONE;
}

int rt_tok_n_vocab(const RtTokenizer *t)
{
    return t ? t->n : 0;
}

int32_t rt_tok_bos(const RtTokenizer *t)
{
    return t ? t->bos : -1;
}

int32_t rt_tok_eos(const RtTokenizer *t)
{
    return t ? t->eos : -1;
}

int32_t rt_tok_unk(const RtTokenizer *t)
{
    return t ? t->unk : -1;
}

int32_t rt_tok_pad(const RtTokenizer *t)
{
    return t ? t->pad : -1;
}

int rt_tok_add_bos(const RtTokenizer *t)
{
    return t ? t->add_bos : 0;
}

int rt_tok_n_merges_ignored(const RtTokenizer *t)
{
    return t ? t->merges_ignored : 0;
}

const char *rt_tok_text(const RtTokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || id >= t->n) return NULL;
    if (len) *len = t->off[id + 1] - t->off[id];
    return t->pool + t->off[id];
}

RtTokType rt_tok_type(const RtTokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n ? (RtTokType)t->type[id] : RT_TOK_TYPE_UNDEFINED;
}
