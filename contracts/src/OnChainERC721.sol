// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {Base64} from "@openzeppelin/contracts/utils/Base64.sol";
import {Strings} from "@openzeppelin/contracts/utils/Strings.sol";

/// @title OnChainERC721
/// @notice An ERC-721 whose token URIs are data: URIs built on chain: base64 JSON metadata
/// with an embedded base64 SVG image. Anyone may mint.
contract OnChainERC721 is ERC721 {
    using Strings for uint256;

    constructor() ERC721("OnChain", "ONC") {}

    function mint(address to, uint256 id) external {
        _safeMint(to, id);
    }

    /// @notice Reverts with ERC721NonexistentToken for a token that does not exist.
    function tokenURI(uint256 tokenId) public view override returns (string memory) {
        _requireOwned(tokenId);
        string memory id = tokenId.toString();
        string memory svg = string.concat(
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100">',
            '<rect width="100" height="100" fill="#224"/>',
            '<text x="50" y="58" fill="#fff" font-size="20" text-anchor="middle">#',
            id,
            "</text></svg>"
        );
        string memory json = string.concat(
            '{"name":"OnChain #',
            id,
            '","description":"Fully on-chain token","image":"data:image/svg+xml;base64,',
            Base64.encode(bytes(svg)),
            '","attributes":[{"trait_type":"Number","value":',
            id,
            "}]}"
        );
        return string.concat("data:application/json;base64,", Base64.encode(bytes(json)));
    }
}
