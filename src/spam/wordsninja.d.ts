// The types of wordsninja 1.1 (a port of wordninja: English words segmented by word frequency), which ships none.
declare module 'wordsninja' {
  export default class WordsNinja {
    loadDictionary(): Promise<unknown>;
    splitSentence(s: string, opts?: { camelCaseSplitter?: boolean; capitalizeFirstLetter?: boolean; joinWords?: false }): string[];
  }
}
